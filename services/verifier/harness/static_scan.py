"""A static pass over a route's files: imports and calls that no kernel needs, each named by the cheat class it enables.

Pure stdlib (ast). It also lists the route's Triton kernels (functions decorated with ``triton.jit``), so that the
GPU profiler pass can tell the route's own kernels from vendor or ATen kernels.
"""

import ast
from dataclasses import dataclass, field
from pathlib import Path

_CLASS5 = "class 5 (side streams / hidden work)"
_CLASS6 = "class 6 (patching the harness)"
_CLASS7 = "class 7 (L2 persistence)"
_CLASS8 = "class 8 (lowered precision)"
_CLASS9 = "class 9 (library calls)"
_CLASS11 = "class 11 (computing outside the recorder)"

# Top-level modules a kernel file has no business importing, and why.
FORBIDDEN_MODULES = {
    "subprocess": (_CLASS11, "runs other programs"),
    "multiprocessing": (_CLASS5, "starts processes"),
    "threading": (_CLASS5, "starts threads"),
    "_thread": (_CLASS5, "starts threads"),
    "concurrent": (_CLASS5, "starts threads or processes"),
    "asyncio": (_CLASS5, "runs work in the background"),
    "socket": (_CLASS6, "opens network connections"),
    "http": (_CLASS6, "opens network connections"),
    "urllib": (_CLASS6, "opens network connections"),
    "requests": (_CLASS6, "opens network connections"),
    "ctypes": (_CLASS11, "calls native code outside the recorder (ctypes)"),
    "cffi": (_CLASS11, "calls native code outside the recorder (cffi)"),
    "numpy": (_CLASS11, "computes with numpy"),
    "cupy": (_CLASS11, "computes with cupy"),
    "numba": (_CLASS11, "computes with numba"),
    "jax": (_CLASS11, "computes with jax"),
    "scipy": (_CLASS11, "computes with scipy"),
    "pandas": (_CLASS11, "computes with pandas"),
    "gc": (_CLASS6, "reaches into the interpreter's objects (gc)"),
    "inspect": (_CLASS6, "reaches into the caller's frames (inspect)"),
    "sys": (_CLASS6, "reaches into the interpreter (sys)"),
    "builtins": (_CLASS6, "rebinds builtins"),
    "importlib": (_CLASS6, "imports modules dynamically"),
    "atexit": (_CLASS6, "runs code at exit (the result channel)"),
    "signal": (_CLASS6, "installs signal handlers"),
    "pickle": (_CLASS6, "loads pickled objects"),
    "marshal": (_CLASS6, "loads code objects"),
    "services": (_CLASS6, "imports the harness or the services"),
    "shutil": (_CLASS6, "touches files"),
    "tempfile": (_CLASS6, "touches files"),
}
FORBIDDEN_SUBMODULES = {
    "torch.utils.cpp_extension": (_CLASS9, "builds a native extension the recorder cannot see into"),
    "torch._dynamo": (_CLASS9, "uses torch's compiler instead of its own kernels"),
    "torch._inductor": (_CLASS9, "uses torch's compiler instead of its own kernels"),
    "torch.backends": (_CLASS8, "changes torch's math backends"),
    "triton.runtime.interpreter": (_CLASS6, "reaches into Triton's interpreter"),
}
# Calls, matched on the dotted name's last parts.
FORBIDDEN_CALLS = {
    "cuda.Stream": (_CLASS5, "creates a CUDA stream"),
    "cuda.ExternalStream": (_CLASS5, "creates a CUDA stream"),
    "cuda.stream": (_CLASS5, "switches to another CUDA stream"),
    "cuda.set_stream": (_CLASS5, "switches to another CUDA stream"),
    "Stream": (_CLASS5, "creates a CUDA stream"),
    "compile": (_CLASS9, "uses torch.compile or compile()"),
    "set_float32_matmul_precision": (_CLASS8, "lowers float32 matmul precision"),
    "cpu": (_CLASS11, "moves data to the host (.cpu())"),
    "numpy": (_CLASS11, "moves data to numpy (.numpy())"),
    "tolist": (_CLASS11, "moves data to Python lists (.tolist())"),
    "setattr": (_CLASS6, "sets attributes dynamically"),
    "delattr": (_CLASS6, "deletes attributes dynamically"),
    "globals": (_CLASS6, "reaches into module globals"),
    "vars": (_CLASS6, "reaches into namespaces"),
    "eval": (_CLASS6, "evaluates code"),
    "exec": (_CLASS6, "executes code"),
    "__import__": (_CLASS6, "imports modules dynamically"),
    "open": (_CLASS6, "opens files (the result channel)"),
    "system": (_CLASS11, "runs a shell command"),
    "popen": (_CLASS11, "runs a shell command"),
    "fork": (_CLASS5, "forks the process"),
    "_exit": (_CLASS6, "ends the process"),
    "kill": (_CLASS6, "sends signals"),
}
_L2_WORDS = ("PersistingL2", "cudaDeviceSetLimit", "cuCtxSetLimit", "StreamSetAttribute", "accessPolicyWindow")
_INTROSPECTION_ATTRS = {
    "__globals__",
    "__code__",
    "__builtins__",
    "__subclasses__",
    "__closure__",
    "f_back",
    "f_globals",
    "f_locals",
    "gi_frame",
    "tb_frame",
}


# torch's private API (torch._C, torch.utils._python_dispatch, torch.autograd.profiler._is_profiler_enabled, ...) is
# how a route would notice the harness's dispatch recorder or profiler and behave only while watched.
_TORCH_INTERNALS = (_CLASS6, "reaches into torch internals (could tell when the harness is recording)")


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _is_private_path(parts: list[str]) -> bool:
    return any(_is_private(part) for part in parts)


@dataclass
class ScanResult:
    violations: list[str] = field(default_factory=list)  # "class N (...): file.py:line what"
    triton_kernels: set[str] = field(default_factory=set)


def _dotted(node) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    elif isinstance(node, ast.Call):
        parts.append(_dotted(node.func) + "()")
    return ".".join(reversed(parts))


def _root_name(node):
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _is_triton_kernel(func: ast.FunctionDef) -> bool:
    for deco in func.decorator_list:
        target = deco.func if isinstance(deco, ast.Call) else deco
        if _dotted(target).split(".")[-1] in {"jit", "autotune", "heuristics"}:
            return True
    return False


def scan_source(source: str, filename: str) -> ScanResult:
    result = ScanResult()
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as err:
        result.violations.append(f"route: {filename}:{err.lineno} does not parse: {err.msg}")
        return result
    imported_modules: set[str] = set()
    torch_aliases: set[str] = set()

    def flag(cls_what: tuple[str, str], node, detail: str = ""):
        cls, what = cls_what
        suffix = f" ({detail})" if detail else ""
        result.violations.append(f"{cls}: {filename}:{getattr(node, 'lineno', 0)} {what}{suffix}")

    def check_module(name: str, node):
        top = name.split(".")[0]
        if top in FORBIDDEN_MODULES:
            flag(FORBIDDEN_MODULES[top], node, f"import {name}")
        for prefix, reason in FORBIDDEN_SUBMODULES.items():
            if name == prefix or name.startswith(prefix + "."):
                flag(reason, node, f"import {name}")
                break
        else:
            if top == "torch" and _is_private_path(name.split(".")[1:]):
                flag(_TORCH_INTERNALS, node, f"import {name}")

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                check_module(alias.name, node)
                imported_modules.add((alias.asname or alias.name).split(".")[0])
                if alias.name.split(".")[0] == "torch":
                    torch_aliases.add((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level == 0:
                check_module(base, node)
                for alias in node.names:
                    check_module(f"{base}.{alias.name}", node)
                    imported_modules.add(alias.asname or alias.name)
                    if base.split(".")[0] == "torch":
                        torch_aliases.add(alias.asname or alias.name)
        elif isinstance(node, ast.FunctionDef) and _is_triton_kernel(node):
            result.triton_kernels.add(node.name)

    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _dotted(node.func) in {"getattr", "builtins.getattr"} and len(node.args) > 1:
            attr = node.args[1]
            if not (isinstance(attr, ast.Constant) and isinstance(attr.value, str)) or _is_private(attr.value):
                flag((_CLASS6, "looks attributes up by computed or private names"), node, "getattr()")
        if isinstance(node, ast.Call):
            name = _dotted(node.func)
            for suffix, reason in FORBIDDEN_CALLS.items():
                if name == suffix or name.endswith("." + suffix):
                    flag(reason, node, name + "()")
                    break
        if isinstance(node, ast.Attribute) and node.attr in _INTROSPECTION_ATTRS:
            flag((_CLASS6, "introspects frames or functions"), node, node.attr)
        elif isinstance(node, ast.Attribute) and _is_private(node.attr) and _root_name(node) in torch_aliases:
            flag(_TORCH_INTERNALS, node, _dotted(node))
        if isinstance(node, (ast.Name, ast.Attribute, ast.Constant)):
            text = getattr(node, "id", None) or getattr(node, "attr", None) or getattr(node, "value", None)
            if isinstance(text, str) and any(word in text for word in _L2_WORDS):
                flag((_CLASS7, "sets up a persisting-L2 carve-out"), node, text[:60])
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for target in targets:
                if not isinstance(target, (ast.Attribute, ast.Subscript)):
                    continue
                root = _root_name(target)
                dotted = _dotted(target.value if isinstance(target, ast.Subscript) else target)
                if "backends" in dotted.split(".") or "allow_tf32" in dotted:
                    flag((_CLASS8, "changes torch's math backend flags"), node, dotted)
                elif root in imported_modules:
                    flag((_CLASS6, "rebinds an attribute of an imported module"), node, dotted)
    return result


def scan_route(route_dir: Path) -> dict[str, ScanResult]:
    """Scan every .py file under the route directory; keys are paths relative to it."""
    results = {}
    for path in sorted(route_dir.rglob("*.py")):
        rel = str(path.relative_to(route_dir))
        results[rel] = scan_source(path.read_text(errors="replace"), rel)
    return results
