"""The one reading path of settings, logs, results and study files (:func:`torch_wge.io.read_document`):
regular files only, bounded in size and nesting, YAML without aliases, and errors that cut a value
before they format it."""

import os
import time

import pytest

from torch_wge import io


def test_a_fifo_or_a_device_is_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "fifo.json")  # opened for reading, it would wait for a writer
    os.symlink("/dev/zero", tmp_path / "zero.json")  # read, it would never end
    for name in ("fifo.json", "zero.json"):
        started = time.monotonic()
        with pytest.raises(OSError, match="not a regular file") as refused:
            io.read_document(tmp_path / name)
        assert refused.value.filename == str(tmp_path / name) and time.monotonic() - started < 5


def test_a_file_above_the_size_bound_is_refused_unread(tmp_path, monkeypatch):
    monkeypatch.setattr(io, "MAX_DOCUMENT_BYTES", 100)
    (tmp_path / "big.json").write_text("[" + "1," * 60 + "1]")
    with pytest.raises(io.UnreadableFileError, match=r"big.json: larger than 100 bytes; refused"):
        io.read_document(tmp_path / "big.json")
    (tmp_path / "small.json").write_text("[1]")
    assert io.read_document(tmp_path / "small.json") == [1]


@pytest.mark.parametrize(
    "name, text",
    [
        ("deep.json", '{"lr": ' + "[" * 100_000 + "]" * 100_000 + "}"),
        ("deep.yaml", "lr: " + "[" * 100_000 + "]" * 100_000 + "\n"),
        ("deep.jsonl", '{"epoch": 1}\n' + "[" * 33 + "]" * 33 + "\n"),
        ("objects.json", '{"a": ' * 40 + "1" + "}" * 40),
    ],
)
def test_nesting_deeper_than_the_bound_is_refused_without_recursion(name, text, tmp_path):
    (tmp_path / name).write_text(text)
    where = f"{tmp_path / name}, line 2" if name.endswith("jsonl") else str(tmp_path / name)
    with pytest.raises(io.UnreadableFileError, match=f"^{where}: nested deeper than 32 levels; refused$"):
        io.read_document(tmp_path / name, "json-lines" if name.endswith("jsonl") else None)


def test_brackets_inside_strings_are_no_nesting(tmp_path):
    (tmp_path / "strings.json").write_text('{"a": "' + "[" * 100 + '", "b": ["\\"[{", "]]"]}')
    assert io.read_document(tmp_path / "strings.json") == {"a": "[" * 100, "b": ['"[{', "]]"]}
    assert io.read_document(tmp_path / "strings.json", "json") == io.read_document(tmp_path / "strings.json")


def test_a_yaml_alias_bomb_is_refused_at_once(tmp_path):
    pytest.importorskip("yaml")
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"{x}: &{x} [*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p}]" for p, x in zip("abcdefgh", "bcdefghi")]
    (tmp_path / "bomb.yaml").write_text("\n".join([*lines, "lr: *i", ""]))
    started = time.monotonic()
    with pytest.raises(io.UnreadableFileError, match=r"bomb.yaml: YAML aliases \(\*a\) are refused"):
        io.read_document(tmp_path / "bomb.yaml")
    assert time.monotonic() - started < 5
    (tmp_path / "plain.yml").write_text("lr: 0.01\nspace: {beta: [0.2, 0.4]}\n")
    assert io.read_document(tmp_path / "plain.yml") == {"lr": 0.01, "space": {"beta": [0.2, 0.4]}}


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("a.json", b"{lr: 1", "not valid JSON (Expecting property name enclosed in double quotes: line 1 column 2)"),
        ("a.json", b'{"a": "caf\xe9"}', "not UTF-8 text (byte 10)"),
        ("a.json", b"[" + b"1" * 5000 + b"]", "not valid JSON (Exceeds the limit"),
        ("a.yaml", b"lr: [1, 2", "not valid YAML"),
        ("a.yaml", b"---\na: 1\n---\nb: 2\n", "not valid YAML"),
    ],
)
def test_an_invalid_file_is_one_line_naming_it(name, content, message, tmp_path):
    (tmp_path / name).write_bytes(content)
    with pytest.raises(io.UnreadableFileError) as refused:
        io.read_document(tmp_path / name)
    assert str(refused.value).startswith(f"{tmp_path / name}: {message}") and "\n" not in str(refused.value)


def test_json_lines_leave_out_a_torn_last_line_and_name_a_bad_line(tmp_path):
    (tmp_path / "log.jsonl").write_text('{"epoch": 1}\n[2]\n{"epoch": 3, "lo')
    assert io.read_document(tmp_path / "log.jsonl", "json-lines") == [{"epoch": 1}, [2]]
    (tmp_path / "log.jsonl").write_text('{"epoch": 1}\ngarbage\n')
    with pytest.raises(io.UnreadableFileError, match=r"log.jsonl, line 2: not valid JSON"):
        io.read_document(tmp_path / "log.jsonl", "json-lines")


def test_short_repr_cuts_before_it_formats():
    assert io.short_repr(list(range(10**6))) == "[0, 1, 2, 3, 4, 5, ...]"
    assert io.short_repr(10**5000) == "<an integer of 16610 bits>"
    nested: list = []
    for _ in range(100_000):  # repr() of it would exceed the recursion limit
        nested = [nested]
    assert io.short_repr(nested) == "[[[[...]]]]"
    assert len(io.short_repr("x" * 10**7)) <= 60
    assert io.short_repr("lr", 60) == "'lr'" and io.short_repr(0.5) == "0.5"
