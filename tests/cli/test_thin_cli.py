"""The CLI stays thin: its commands parse their options and call the library (`arena.ui`, `arena.league`,
...), so the console script stays short and each command fits on a screen."""

import ast
from pathlib import Path

import arena.cli

CLI = Path(arena.cli.__file__)
MAX_FILE_LINES = 500
MAX_COMMAND_LINES = 60


def _is_command(decorator: ast.expr) -> bool:
    """`@app.command()`, `@replay_app.command("list")`, ...: a typer command, named or not."""
    call = decorator.func if isinstance(decorator, ast.Call) else decorator
    return isinstance(call, ast.Attribute) and call.attr == "command"


def _commands(tree: ast.Module) -> dict[str, int]:
    """Each command function's line span, decorators included."""
    spans = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(map(_is_command, node.decorator_list)):
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            spans[node.name] = node.end_lineno - start + 1
    return spans


def test_cli_is_under_500_lines():
    lines = len(CLI.read_text().splitlines())
    assert lines < MAX_FILE_LINES, f"{CLI} has {lines} lines: move logic into arena/ui (or below)"


def test_no_command_is_over_60_lines():
    spans = _commands(ast.parse(CLI.read_text()))
    assert {"play", "replay_list", "replay_verify", "league_run", "ratings", "train"} <= set(spans), spans
    long = {name: n for name, n in spans.items() if n > MAX_COMMAND_LINES}
    assert not long, f"commands over {MAX_COMMAND_LINES} lines (parse the options and call a library function): {long}"


def test_the_measure_sees_a_long_command():
    src = "@app.command('x')\ndef x():\n" + "    pass\n" * 70 + "\n@other.callback()\ndef y():\n" + "    pass\n" * 70
    assert _commands(ast.parse(src)) == {"x": 72}
