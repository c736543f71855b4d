"""Reading a triples file (issue 65, item 5): a block at a time, so that a file that cannot be read
is refused early and by name: identifiers with control characters or line separators, a line without
end, a file larger than the memory, and a memory that runs out while it is read."""

import time
import warnings

import pytest

import torch_wge.datasets.base as base
from torch_wge.datasets import TriplesFolder
from torch_wge.datasets.base import read_triples

#: Characters an identifier may not hold: each would split its line for some reader (str.splitlines, a
#: TSV reader, a terminal) or is no text at all.
REFUSED = ["\x00", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x1b", "\x7f", "\x85", "\u2028", "\u2029", "\r"]


@pytest.mark.parametrize("char", REFUSED, ids=[f"U+{ord(c):04X}" for c in REFUSED])
def test_an_identifier_with_a_control_character_or_line_separator_is_refused(tmp_path, char):
    path = tmp_path / "train.txt"
    path.write_text(f"a\tr\tb\nQ{char}1\tr\tb\n", newline="")
    escaped = char.encode("unicode_escape").decode("ascii")
    with pytest.raises(ValueError) as refused:
        read_triples(str(path))
    message = str(refused.value)
    assert message.startswith(f"{path}, line 2: an identifier holds the control character or line separator {escaped}")
    assert f"(U+{ord(char):04X})" in message and "\n" not in message


def test_line_endings_and_a_bom_are_no_identifiers_characters(tmp_path):
    path = tmp_path / "train.txt"
    path.write_bytes(b"\xef\xbb\xbfa\tr\tb\r\n\r\nb\tr\tc\r\r\nc\tr\ta")
    assert read_triples(str(path)) == ([["a", "r", "b"], ["b", "r", "c"], ["c", "r", "a"]], [1, 3, 4])


def test_a_file_read_in_small_blocks_reads_as_in_one(tmp_path, monkeypatch):
    text = "".join(f"e{i}\tr{i % 3}\te{i + 1}\n" if i % 5 else "\n" for i in range(200)) + "x \tr\ty"
    path = tmp_path / "train.txt"
    path.write_text(text)
    with warnings.catch_warnings(record=True) as whole_warnings:
        warnings.simplefilter("always")
        whole = read_triples(str(path))
    monkeypatch.setattr(base, "READ_BLOCK_BYTES", 7)
    with warnings.catch_warnings(record=True) as block_warnings:
        warnings.simplefilter("always")
        assert read_triples(str(path)) == whole
    assert [str(w.message) for w in block_warnings] == [str(w.message) for w in whole_warnings]
    assert "line 201: an identifier begins or ends with a space (1 such" in str(block_warnings[0].message)
    (tmp_path / "latin.txt").write_bytes(b"a\tr\tb\n" * 5 + b"caf\xe9\tr\tb\n")
    with pytest.raises(ValueError, match=r"latin.txt: not UTF-8 text \(byte 0xe9 at offset 33\)"):
        read_triples(str(tmp_path / "latin.txt"))


def test_a_sparse_file_of_3_gb_is_refused_at_its_first_line(tmp_path):
    # NUL bytes without a line break: refused once a line is longer than any line of triples,
    # not after reading 3 GB (minutes, and twice as much memory)
    path = tmp_path / "train.txt"
    with open(path, "wb") as f:
        f.truncate(3 * 2**30)
    started = time.monotonic()
    with pytest.raises(ValueError, match=rf"^{path}, line 1: longer than 1,048,576 bytes without a line break"):
        read_triples(str(path))
    assert time.monotonic() - started < 10


def test_a_file_larger_than_the_memory_is_refused_before_it_is_read(tmp_path, monkeypatch):
    path = tmp_path / "train.txt"
    path.write_text("e1\tr\te2\n" * 10_000)  # 80,000 bytes
    monkeypatch.setattr(base, "READ_BLOCK_BYTES", 800)
    monkeypatch.setattr(base, "physical_memory", lambda: 1_000_000)
    parsed = []
    real = base._parse_lines
    monkeypatch.setattr(base, "_parse_lines", lambda *args: parsed.append(1) or real(*args))
    with pytest.raises(ValueError) as refused:
        read_triples(str(path))
    assert str(refused.value) == (
        f"{path}: 80,000 bytes, about 10,000 lines, whose triples would take about 0.0 GiB of memory once read, "
        f"more than the 0.0 GiB of this machine; refused before it is read"
    )
    assert len(parsed) == 1  # the first block only
    monkeypatch.setattr(base, "physical_memory", lambda: 10**8)
    assert len(read_triples(str(path))[0]) == 10_000


def test_a_memory_that_runs_out_while_reading_names_the_file(tmp_path, monkeypatch):
    path = tmp_path / "train.txt"
    path.write_text("a\tr\tb\n")

    def out_of_memory(*args):
        raise MemoryError

    monkeypatch.setattr(base, "_parse_lines", out_of_memory)
    with pytest.raises(ValueError, match=rf"^{path}: out of memory while reading it \(6 bytes; 0 triples read\)"):
        read_triples(str(path))


def test_a_dataset_folder_with_such_an_identifier_is_refused_naming_the_file(tmp_path):
    folder = tmp_path / "kg"
    folder.mkdir()
    for name, text in (("train.txt", "a\tr\tb\n"), ("valid.txt", "a\tr\tb\n"), ("test.txt", "a\tr\tb\u2028c\n")):
        (folder / name).write_text(text)
    with pytest.raises(ValueError, match=r"test.txt, line 1: .* \\u2028 \(U\+2028\)"):
        TriplesFolder(str(folder), log=False)
    assert not list(folder.rglob("*.pt"))  # nothing processed
