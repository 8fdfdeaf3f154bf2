"""Determinism fingerprints of the workflows whose runs outlive a deploy (`fingerprints.json`).

Why: `test_replay.py` replays histories recorded by today's code, so re-recording after a change makes
it pass again while production still holds runs the old code recorded. The fingerprint is checked in
beside the histories and `make record-histories` does not rewrite it: a change to a long-lived
workflow fails `test_fingerprints.py` until someone decides, and the failure says what to decide
(guard it with `workflow.patched`, docs/decisions/workflow-versioning.md).

Per long-lived workflow it holds:
- `interface`: the run, signal, update and query handlers by name with their signatures (runs in
  flight hold their input in that shape and are signalled and updated by those names);
- `commands`: per handler, the calls that issue Temporal commands (activities and local activities by
  name, timers, children by workflow name, patches, continue-as-new), in source order with the helpers
  they call inlined: the shape of what its runs record;
- `code`: a digest per definition of the workflow class and of everything in `workflows/` and
  `memwarden.temporal.names` it reaches (module-level functions and constants, activity names;
  another workflow counts by its name only),
  computed on the syntax tree without docstrings: comments, docstrings and formatting do not count,
  any other edit does (control flow, arguments, timeouts);
- `patches`: the `workflow.patched` / `workflow.deprecate_patch` ids in that code.

The commands come from the code, not from the recorded histories: how often a retry loop goes round
differs between recordings, the code that issues the commands does not. `test_fingerprints.py` checks
that every command a recorded history holds is one the code's shape names.

`make workflow-fingerprints` (`python -m tests.workflows.fingerprints --write`) rewrites the file;
without `--write` it prints what differs.
"""

from __future__ import annotations

import ast
import base64
import copy
import hashlib
import json
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS_DIR = ROOT / "workflows"
NAMES_MODULE = "memwarden.temporal.names"
NAMES_FILE = ROOT / "memwarden" / "temporal" / "names.py"
HISTORIES_DIR = Path(__file__).resolve().parent / "histories"
FINGERPRINTS = Path(__file__).resolve().parent / "fingerprints.json"

LONG_LIVED = (
    "PendingWriteWorkflow",
    "ImportWorkflow",
    "ForgetWorkflow",
    "RevalidateWorkflow",
    "InvalidateWorkflow",
    "PeriodicRevalidationWorkflow",
    "RetentionWorkflow",
    "SummarizeWorkflow",
    "RollbackWorkflow",
    "ConversationWorkflow",
)
"""Runs that can outlive a deploy: they wait on a confirmation window, durable timers, signals,
children or server-side activity retries, with no execution timeout over them."""
SHORT_LIVED = {
    "RememberWorkflow": "started by the API with an execution timeout (workflow_timeout_seconds)",
    "RetrieveWorkflow": "started by the API with an execution timeout (workflow_timeout_seconds)",
    "HealthWorkflow": "started by the API with a few seconds' execution timeout",
    "RevertWorkflow": "started by the API with an execution timeout (workflow_timeout_seconds)",
}
"""Workflows whose runs end within the API's execution timeout: the replay test covers them."""

HANDLERS = ("run", "signal", "update", "query")
PATCH_CALLS = ("patched", "deprecate_patch")

Sources = Mapping[str, str]
"""Module name (`workflows.forget`) -> its source text."""


def load_sources(directory: Path = WORKFLOWS_DIR) -> dict[str, str]:
    """The workflows' modules and the activity names they call (a renamed activity changes the workflow)."""
    sources = {f"workflows.{p.stem}": p.read_text() for p in sorted(directory.glob("*.py"))}
    sources[NAMES_MODULE] = NAMES_FILE.read_text()
    return sources


class _NoDocstrings(ast.NodeTransformer):
    """Drops every bare string statement (docstrings, attribute docstrings): it has no effect when run."""

    def generic_visit(self, node: ast.AST) -> ast.AST:
        super().generic_visit(node)
        for name in ("body", "orelse", "finalbody"):
            body = getattr(node, name, None)
            if isinstance(body, list) and body and all(isinstance(s, ast.stmt) for s in body):
                kept = [s for s in body if not _is_string_statement(s)]
                setattr(node, name, kept or ([ast.Pass()] if name == "body" else []))
        return node


def _is_string_statement(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def _module_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Module-level statements, including those inside `with` (imports passed through) and `if`/`try`."""
    for stmt in body:
        if isinstance(stmt, ast.With | ast.If | ast.Try):
            yield from _module_statements(stmt.body)
            if isinstance(stmt, ast.If | ast.Try):
                yield from _module_statements(stmt.orelse)
        else:
            yield stmt


def _decorator_call(decorator: ast.expr) -> tuple[str | None, ast.Call | None]:
    """`workflow.defn(name=...)` -> ("defn", call); `workflow.run` -> ("run", None)."""
    call = decorator if isinstance(decorator, ast.Call) else None
    target = call.func if call is not None else decorator
    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "workflow":
        return target.attr, call
    return None, None


def _name_kwarg(call: ast.Call | None) -> str | None:
    for kw in call.keywords if call is not None else []:
        if kw.arg == "name" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
            return kw.value.value
    return None


@dataclass
class _Module:
    name: str
    defs: dict[str, ast.AST] = field(default_factory=dict)
    imports: dict[str, tuple[str, str]] = field(default_factory=dict)
    workflows: dict[str, str] = field(default_factory=dict)
    """Class name -> the name the workflow is registered under."""

    @classmethod
    def parse(cls, name: str, source: str) -> _Module:
        module = cls(name)
        for stmt in _module_statements(ast.parse(source).body):
            if isinstance(stmt, ast.ImportFrom) and stmt.module is not None:
                for alias in stmt.names:
                    module.imports[alias.asname or alias.name] = (stmt.module, alias.name)
            elif isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                module.defs[stmt.name] = stmt
                if isinstance(stmt, ast.ClassDef):
                    for decorator in stmt.decorator_list:
                        kind, call = _decorator_call(decorator)
                        if kind == "defn":
                            module.workflows[stmt.name] = _name_kwarg(call) or stmt.name
            elif isinstance(stmt, ast.Assign | ast.AnnAssign):
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                for target in targets:
                    for node in ast.walk(target):
                        if isinstance(node, ast.Name):
                            module.defs[node.id] = stmt
        return module


def _signature(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    returns = f" -> {ast.unparse(fn.returns)}" if fn.returns is not None else ""
    return f"({ast.unparse(fn.args)}){returns}"


def _handlers(
    modules: Mapping[str, _Module], module: _Module, cls: ast.ClassDef
) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """(`run` | `signal <name>` | `update <name>` | `query <name>`, its method), names as registered."""
    for fn in cls.body:
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for decorator in fn.decorator_list:
            kind, call = _decorator_call(decorator)
            if kind == "run":
                yield "run", fn
            elif kind in HANDLERS:
                named = next((k.value for k in call.keywords if k.arg == "name"), None) if call else None
                yield f"{kind} {_constant(modules, module, named) if named is not None else fn.name}", fn


@dataclass
class Fingerprint:
    workflow: str
    module: str
    interface: dict[str, str]
    commands: dict[str, list[str]]
    code: dict[str, str]
    patches: list[str]

    def as_json(self) -> dict[str, Any]:
        return {
            "module": self.module,
            "interface": self.interface,
            "commands": self.commands,
            "code": self.code,
            "patches": self.patches,
        }


def _index(sources: Sources) -> dict[str, _Module]:
    return {name: _Module.parse(name, text) for name, text in sources.items()}


def _locate(modules: Mapping[str, _Module], workflow: str) -> tuple[_Module, str]:
    for module in modules.values():
        for cls_name, registered in module.workflows.items():
            if registered == workflow:
                return module, cls_name
    raise LookupError(f"no workflow registered as {workflow!r} in workflows/")


def _patch_id(modules: Mapping[str, _Module], module: _Module, node: ast.Call) -> str | None:
    """The id a `workflow.patched(...)` / `workflow.deprecate_patch(...)` call passes (a literal or a constant)."""
    func = node.func
    if not (isinstance(func, ast.Attribute) and func.attr in PATCH_CALLS and node.args):
        return None
    return _constant(modules, module, node.args[0])


def code_of(modules: Mapping[str, _Module], workflow: str) -> tuple[dict[str, str], list[str]]:
    """Digest per definition the workflow reaches in workflows/, and the patch ids in them."""
    root_module, root = _locate(modules, workflow)
    parts: dict[str, str] = {}
    patches: set[str] = set()
    queue: list[tuple[_Module, str]] = [(root_module, root)]
    seen: set[tuple[str, str]] = set()
    while queue:
        module, name = queue.pop()
        if (module.name, name) in seen:
            continue
        seen.add((module.name, name))
        if name in module.imports:
            source_module, source_name = module.imports[name]
            if source_module in modules:
                queue.append((modules[source_module], source_name))
            continue  # outside workflows/: records, policy, temporalio, the standard library
        node = module.defs.get(name)
        if node is None:
            continue  # a local, a parameter, a builtin
        if name in module.workflows and (module.name, name) != (root_module.name, root):
            parts[f"workflow {module.workflows[name]}"] = "child"  # another workflow: by name, not by body
            continue
        stripped = _NoDocstrings().visit(copy.deepcopy(node))
        parts[f"{module.name}.{name}"] = hashlib.sha256(ast.dump(stripped).encode()).hexdigest()[:16]
        for inner in ast.walk(node):
            if isinstance(inner, ast.Name):
                queue.append((module, inner.id))
            elif isinstance(inner, ast.Call) and (patch := _patch_id(modules, module, inner)) is not None:
                patches.add(patch)
    return dict(sorted(parts.items())), sorted(patches)


ACTIVITY_CALLS = {"execute_activity": "activity", "start_activity": "activity"}
LOCAL_ACTIVITY_CALLS = {"execute_local_activity": "local activity", "start_local_activity": "local activity"}
CHILD_CALLS = {"execute_child_workflow": "child", "start_child_workflow": "child"}


def _constant(modules: Mapping[str, _Module], module: _Module, node: ast.expr) -> str:
    """A call's target as its value: a literal, a constant of workflows/, a workflow class's name."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Attribute) and node.attr == "run":  # `SomeWorkflow.run`
        node = node.value
    if isinstance(node, ast.Name):
        target, name = module, node.id
        while name in target.imports and target.imports[name][0] in modules:
            source_module, name = target.imports[name]
            target = modules[source_module]
        if name in target.workflows:
            return target.workflows[name]
        stmt = target.defs.get(name)
        value = stmt.value if isinstance(stmt, ast.Assign | ast.AnnAssign) else None
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            return value.value
    return ast.unparse(node)  # not resolvable here (a parameter): shown as written


def _workflow_call(node: ast.Call) -> str | None:
    func = node.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "workflow":
        return func.attr
    return None


def _function(
    modules: Mapping[str, _Module], module: _Module, cls: ast.ClassDef, call: ast.Call
) -> tuple[_Module, ast.FunctionDef | ast.AsyncFunctionDef] | None:
    """The helper a call runs, when it is in workflows/: a method on `self`, or a module-level function."""
    func = call.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
        for stmt in cls.body:
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef) and stmt.name == func.attr:
                return module, stmt
        return None
    if isinstance(func, ast.Name):
        target, name = module, func.id
        while name in target.imports and target.imports[name][0] in modules:
            source_module, name = target.imports[name]
            target = modules[source_module]
        node = target.defs.get(name)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            return target, node
    return None


def _commands_of(
    modules: Mapping[str, _Module],
    module: _Module,
    cls: ast.ClassDef,
    fn: ast.FunctionDef | ast.AsyncFunctionDef,
    stack: tuple[str, ...] = (),
) -> list[str]:
    """The command-issuing calls of `fn` in source order, helpers in workflows/ inlined."""
    found: list[str] = []

    class Visitor(ast.NodeVisitor):
        def visit_Call(self, node: ast.Call) -> None:
            kind = _workflow_call(node)
            first = node.args[0] if node.args else None
            if kind in ACTIVITY_CALLS | LOCAL_ACTIVITY_CALLS | CHILD_CALLS and first is not None:
                label = (ACTIVITY_CALLS | LOCAL_ACTIVITY_CALLS | CHILD_CALLS)[kind]
                found.append(f"{label} {_constant(modules, module, first)}")
            elif kind == "sleep":
                found.append("timer (sleep)")
            elif kind == "wait_condition" and any(k.arg == "timeout" for k in node.keywords):
                found.append("timer (wait_condition)")
            elif kind in PATCH_CALLS:
                found.append(f"patch {_patch_id(modules, module, node)}")
            elif kind == "continue_as_new":
                found.append("continue as new")
            elif kind is not None and kind.startswith("upsert_"):
                found.append(kind.replace("_", " "))
            elif kind is None and (helper := _function(modules, module, cls, node)) is not None:
                helper_module, helper_fn = helper
                key = f"{helper_module.name}.{helper_fn.name}"
                if key not in stack:
                    found.extend(_commands_of(modules, helper_module, cls, helper_fn, (*stack, key)))
            self.generic_visit(node)

    for stmt in fn.body:
        Visitor().visit(stmt)
    return found


def _handler_commands(modules: Mapping[str, _Module], module: _Module, cls: ast.ClassDef) -> dict[str, list[str]]:
    return dict(sorted((key, _commands_of(modules, module, cls, fn)) for key, fn in _handlers(modules, module, cls)))


def patch_ids(sources: Sources | None = None) -> frozenset[str]:
    """Every patch id any workflow module passes to `workflow.patched` or `workflow.deprecate_patch`."""
    texts = sources or load_sources()
    modules = _index(texts)
    found: set[str] = set()
    for name, text in texts.items():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Call) and (patch := _patch_id(modules, modules[name], node)) is not None:
                found.add(patch)
    return frozenset(found)


def _payload_json(payload: Mapping[str, Any]) -> Any:
    return json.loads(base64.b64decode(payload.get("data", "")) or b"null")


def _command(event: Mapping[str, Any]) -> str | None:
    """The command an event records, by kind and name; None for events that are not a command's."""
    kind = str(event["eventType"]).removeprefix("EVENT_TYPE_")
    attrs = next((v for k, v in event.items() if k.endswith("EventAttributes")), {})
    if kind == "ACTIVITY_TASK_SCHEDULED":
        return f"activity {attrs['activityType']['name']}"
    if kind == "MARKER_RECORDED":
        marker, details = attrs.get("markerName"), attrs.get("details", {})
        if marker == "core_local_activity":
            return f"local activity {_payload_json(details['data']['payloads'][0])['activity_type']}"
        if marker == "core_patch":
            return f"patch {_payload_json(details['patch-data']['payloads'][0])['id']}"
        return f"marker {marker}"
    if kind == "START_CHILD_WORKFLOW_EXECUTION_INITIATED":
        return f"child {attrs['workflowType']['name']}"
    if kind == "SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED":
        return f"signal {attrs.get('signalName')}"
    if kind == "WORKFLOW_EXECUTION_UPDATE_ACCEPTED":
        return f"accept update {attrs['acceptedRequest']['input']['name']}"
    simple = {
        "TIMER_STARTED": "timer",
        "TIMER_CANCELED": "cancel timer",
        "ACTIVITY_TASK_CANCEL_REQUESTED": "cancel activity",
        "REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED": "cancel external workflow",
        "UPSERT_WORKFLOW_SEARCH_ATTRIBUTES": "upsert search attributes",
        "WORKFLOW_PROPERTIES_MODIFIED": "modify properties",
        "WORKFLOW_EXECUTION_UPDATE_COMPLETED": "complete update",
        "WORKFLOW_EXECUTION_COMPLETED": "complete",
        "WORKFLOW_EXECUTION_FAILED": "fail",
        "WORKFLOW_EXECUTION_CANCELED": "cancel",
        "WORKFLOW_EXECUTION_CONTINUED_AS_NEW": "continue as new",
    }
    return simple.get(kind)


def history_commands(history: Mapping[str, Any]) -> set[str]:
    """The kinds of command a recorded history (its JSON) holds, each once."""
    return {c for e in history["events"] if (c := _command(e)) is not None}


def recorded_commands(workflow: str, histories: Path = HISTORIES_DIR) -> dict[str, set[str]]:
    """Per history recorded for the workflow's cases (top level of `histories/`), its kinds of command."""
    return {p.stem: history_commands(json.loads(p.read_text())) for p in sorted(histories.glob(f"{workflow}-*.json"))}


def uncovered(fingerprint: Fingerprint, recorded: set[str]) -> set[str]:
    """The recorded commands the code's shape does not name (the shape missed a way of issuing one)."""
    issued = {c for cs in fingerprint.commands.values() for c in cs}
    named = set(issued)
    named |= {"complete", "fail", "cancel"}  # how every run ends
    if any(c.startswith("timer ") for c in issued):
        named |= {"timer", "cancel timer"}  # a condition's timeout timer is cancelled when the condition holds
    if any(c.startswith("patch ") for c in issued):
        named.add("upsert search attributes")  # `workflow.patched` also lists its patch in TemporalChangeVersion
    updates = [k.removeprefix("update ") for k in fingerprint.commands if k.startswith("update ")]
    named |= {f"accept update {u}" for u in updates} | ({"complete update"} if updates else set())
    return recorded - named


def compute(sources: Sources | None = None) -> dict[str, Fingerprint]:
    modules = _index(sources or load_sources())
    found: dict[str, Fingerprint] = {}
    for workflow in LONG_LIVED:
        module, cls_name = _locate(modules, workflow)
        cls = module.defs[cls_name]
        assert isinstance(cls, ast.ClassDef)
        code, patches = code_of(modules, workflow)
        found[workflow] = Fingerprint(
            workflow=workflow,
            module=f"{module.name.replace('.', '/')}.py",
            interface=dict(sorted((key, _signature(fn)) for key, fn in _handlers(modules, module, cls))),
            commands=_handler_commands(modules, module, cls),
            code=code,
            patches=patches,
        )
    return found


def load(path: Path = FINGERPRINTS) -> dict[str, dict[str, Any]]:
    loaded: dict[str, dict[str, Any]] = json.loads(path.read_text())
    return loaded


def write(fingerprints: Mapping[str, Fingerprint], path: Path = FINGERPRINTS) -> None:
    body = {name: fp.as_json() for name, fp in fingerprints.items()}
    path.write_text(json.dumps(body, indent=2, sort_keys=False) + "\n")


def _changes(old: Mapping[str, Any], new: Fingerprint) -> tuple[list[str], bool]:
    """What differs, one line each, and whether the commands or the interface did (surely incompatible)."""
    lines: list[str] = []
    surely = False
    for part, now_part in (("interface", new.interface), ("commands", new.commands)):
        was_part = old.get(part, {})
        for key in sorted(set(was_part) | set(now_part)):
            was, now = was_part.get(key), now_part.get(key)
            if was != now:
                surely = True
                shown = ["(none)" if v is None else v for v in (was, now)]
                lines.append(f"{part} of `{key}`: was {shown[0]}, now {shown[1]}")
    for key in sorted(set(old.get("code", {})) | set(new.code)):
        was, now = old.get("code", {}).get(key), new.code.get(key)
        if was != now:
            what = "added" if was is None else "removed" if now is None else "changed"
            lines.append(f"code `{key}` {what}")
    return lines, surely


def _keep_old_histories(patch: str = "<patch id>") -> str:
    return (
        f"copy the workflow's histories recorded by the old code into tests/workflows/histories/{patch}/\n"
        "(they must go on replaying), re-record (`make record-histories`), then accept the fingerprint\n"
        "(`make workflow-fingerprints`)."
    )


def explain(old: Mapping[str, Mapping[str, Any]], new: Mapping[str, Fingerprint]) -> str | None:
    """The failure message when the checked-in fingerprints and the code disagree; None when they agree."""
    blocks: list[str] = []
    guarded: set[str] = set()
    surely = False
    for workflow in sorted(set(old) | set(new)):
        before, now = old.get(workflow), new.get(workflow)
        if now is None:
            blocks.append(f"{workflow}: fingerprinted, but no longer in LONG_LIVED")
            continue
        if before is None:
            blocks.append(f"{workflow} ({now.module}): long-lived, not fingerprinted yet")
            continue
        lines, commands_changed = _changes(before, now)
        if lines:
            surely |= commands_changed
            blocks.append(f"{workflow} ({now.module}):\n" + "\n".join(f"  - {line}" for line in lines))
            guarded |= set(now.patches) - set(before.get("patches", []))
    if not blocks:
        return None
    head = "Long-lived workflows no longer match tests/workflows/fingerprints.json:\n\n" + "\n".join(blocks)
    if guarded:
        patches = ", ".join(repr(p) for p in sorted(guarded))
        return (
            f"{head}\n\nThe change is guarded by workflow.patched({patches}), so runs in flight replay the old\n"
            f"branch. Now {_keep_old_histories(min(guarded))}"
        )
    why = (
        "the new code issues other commands or takes other payloads: they would fail"
        if surely
        else "a changed condition, loop or argument can change the commands they issue"
    )
    return (
        f"{head}\n\nTheir runs outlive a deploy: the runs in flight were recorded by the old code and are replayed\n"
        f"by the new one, and {why}.\n\n"
        "Do not just regenerate the fingerprint. Guard the change so runs in flight keep their commands:\n\n"
        '    if workflow.patched("<what-changed>"):\n'
        "        ...  # the new code\n"
        "    else:\n"
        "        ...  # the old code, unchanged\n\n"
        f"then {_keep_old_histories()}\n"
        "Accept without a patch only a change that cannot alter any run's commands or payloads (a renamed\n"
        "local, a log line, a timeout's value), and say why in the commit message.\n"
        "The rule: docs/decisions/workflow-versioning.md."
    )


def main(argv: list[str]) -> int:
    fingerprints = compute()
    if "--write" in argv:
        write(fingerprints)
        print(FINGERPRINTS.relative_to(ROOT))
        return 0
    message = explain(load(), fingerprints) if FINGERPRINTS.exists() else "no fingerprints.json yet: run with --write"
    print(message or "fingerprints match")
    return 0 if message is None else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
