#!/usr/bin/env python3
"""File-level import loops in Rust crates.

Usage: scripts/import-loops.py [--with-tests] CRATE_DIR...

For each crate directory (its `src/`), every `.rs` file reachable through
`mod` declarations from a crate root (`lib.rs`, `main.rs`, `bin/*`) gets
a module path. The checker reads `use crate::…`, `use super::…`,
`use self::…` and uses of child modules, and `crate::…`/`super::…` paths
in code, resolves each to the file that DEFINES the item (following
`pub use` re-exports, so a `lib.rs` or `mod.rs` facade is looked through)
and draws an edge from the using file to the defining file.

Not edges: `mod x;` declarations (a parent does not depend on its
children by declaring them), and re-exports (`pub use` / `pub(…) use`)
whose names the file does not use itself. Test code (`#[cfg(test)]`
modules) is left out unless `--with-tests` is given.

Prints every strongly connected component of more than one file, with the
items that tie its files together, and exits 1 if there is any (0 if
none, 2 on a usage error).
"""

import os
import re
import sys
from collections import defaultdict

ITEM_KINDS = r"(?:struct|enum|union|trait|type|fn|const|static|mod|macro_rules!)"


def strip_code(text):
    """Blanks comments, strings and char literals, keeping offsets and
    newlines, so that regexes only see code."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif (
            re.match(r'b?r#*"', text[i:i + 40])
            and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_"))
        ):
            m = re.match(r'b?r(#*)"', text[i:])
            end = '"' + m.group(1)
            j = text.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append('""' + re.sub(r"[^\n]", " ", text[i + 2:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j += 1
            out.append('"' + re.sub(r"[^\n]", " ", text[i + 1:j - 1]) + '"')
            i = j
        elif c == "'":
            m = re.match(r"'(\\.[^']*|[^'\\])'", text[i:])
            if m:
                out.append("' '" + " " * (m.end() - 3))
                i += m.end()
            else:  # a lifetime
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def matching_brace(code, open_at):
    depth = 0
    for j in range(open_at, len(code)):
        if code[j] == "{":
            depth += 1
        elif code[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(code)


def parse_use_tree(tree):
    """`a::{b, c::{self, D as E}, f::*}` -> [(segments, alias)]; alias is
    the name the import binds ("*" for a glob)."""
    tokens = re.findall(r"::|\{|\}|,|\*|\w+", tree)
    pos = 0

    def parse(prefix):
        nonlocal pos
        results = []
        segs = list(prefix)
        while pos < len(tokens):
            t = tokens[pos]
            if t == "{":
                pos += 1
                while pos < len(tokens) and tokens[pos] != "}":
                    if tokens[pos] == ",":
                        pos += 1
                        continue
                    results += parse(segs)
                pos += 1
                return results
            if t == "*":
                pos += 1
                return results + [(segs, "*")]
            if t in (",", "}"):
                break
            if t == "::":
                pos += 1
                continue
            if t == "as":
                alias = tokens[pos + 1]
                pos += 2
                return results + [(segs, alias)]
            segs = segs + [t]
            pos += 1
        if segs and len(segs) > len(prefix):
            last = segs[-1]
            if last == "self":
                segs = segs[:-1]
                last = segs[-1] if segs else "self"
            results.append((segs, last))
        return results

    return parse([])


class Module:
    def __init__(self, path, file, start, end, parent):
        self.path = path  # tuple of names
        self.file = file
        self.start, self.end = start, end  # span in the file's code
        self.parent = parent
        self.children = {}  # name -> Module
        self.uses = []  # (segments, alias, is_reexport)
        self.code_paths = []  # segments
        self.defs = set()


class Crate:
    def __init__(self, src, with_tests):
        self.src = src
        self.with_tests = with_tests
        self.files = {}  # file -> stripped code
        self.modules = []

    def load(self, file):
        if file not in self.files:
            with open(file, encoding="utf-8") as f:
                self.files[file] = strip_code(f.read())
        return self.files[file]

    def add_root(self, file):
        self.add_file_module(file, (), None, os.path.dirname(file))

    def add_file_module(self, file, path, parent, child_dir):
        code = self.load(file)
        module = Module(path, file, 0, len(code), parent)
        self.modules.append(module)
        if parent:
            parent.children[path[-1]] = module
        self.scan(module, code, 0, len(code), child_dir)
        return module

    def scan(self, module, code, start, end, child_dir):
        """Finds `mod` items, uses, paths and definitions in code[start:end],
        outside inline child modules (which get modules of their own)."""
        inner = []  # spans of inline modules and skipped test code
        for m in re.finditer(
            r"((?:#\[[^\]]*\]\s*)*)(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*([;{])",
            code[start:end],
        ):
            at = start + m.start()
            if any(s <= at < e for s, e in inner):
                continue
            attrs, name, kind = m.group(1), m.group(2), m.group(3)
            is_test = "cfg(test)" in attrs
            if kind == "{":
                open_at = start + m.end() - 1
                close = matching_brace(code, open_at)
                inner.append((at, close + 1))
                if is_test and not self.with_tests:
                    continue
                child = Module(module.path + (name,), module.file, open_at, close, module)
                module.children[name] = child
                self.modules.append(child)
                self.scan(child, code, open_at + 1, close, os.path.join(child_dir, name))
            else:
                module.defs.add(name)
                if is_test and not self.with_tests:
                    continue
                path_attr = re.search(r'#\[path\s*=\s*"', attrs)
                if path_attr:
                    continue  # not followed; rare in this workspace
                for cand in (
                    os.path.join(child_dir, name + ".rs"),
                    os.path.join(child_dir, name, "mod.rs"),
                ):
                    if os.path.exists(cand):
                        sub_dir = os.path.join(child_dir, name)
                        self.add_file_module(cand, module.path + (name,), module, sub_dir)
                        break
        own = code[start:end]
        # Blank inline modules so their contents are not this module's.
        for s, e in inner:
            rs, re_ = max(s - start, 0), min(e - start, len(own))
            own = own[:rs] + re.sub(r"[^\n]", " ", own[rs:re_]) + own[re_:]
        for m in re.finditer(r"\b" + ITEM_KINDS + r"\s+(\w+)", own):
            module.defs.add(m.group(1))
        # Enum variants, fields etc. do not matter: paths stop at items.
        for m in re.finditer(r"(\bpub(?:\s*\([^)]*\))?\s+)?\buse\s+([^;]+);", own):
            is_reexport = bool(m.group(1))
            for segs, alias in parse_use_tree(m.group(2)):
                module.uses.append((segs, alias, is_reexport, m.start(), m.end()))
        no_uses = re.sub(r"\buse\s+[^;]+;", lambda u: " " * len(u.group(0)), own)
        for m in re.finditer(r"(?<![\w:])((?:crate|super|self)(?:::\w+)+)", no_uses):
            module.code_paths.append(m.group(1).split("::"))
        module.own_code = own

    # -- resolution ------------------------------------------------------

    def start_module(self, module, segs):
        """The module a path starts from and the remaining segments, or
        None for paths outside this crate."""
        head = segs[0]
        if head == "crate":
            root = module
            while root.parent:
                root = root.parent
            return root, segs[1:]
        if head in ("super", "self"):
            cur = module
            while segs and segs[0] in ("super", "self"):
                if segs[0] == "super":
                    cur = cur.parent or cur
                segs = segs[1:]
            return cur, segs
        if head in module.children:
            return module, segs
        return None

    def resolve(self, module, segs, seen=None):
        """The file defining what `segs` names from `module`, or None."""
        seen = seen or set()
        start = self.start_module(module, segs)
        if start is None:
            return None
        cur, rest = start
        while rest and rest[0] in cur.children:
            cur = cur.children[rest[0]]
            rest = rest[1:]
        if not rest or rest[0] == "*":
            return cur.file
        return self.defining_file(cur, rest[0], seen)

    def defining_file(self, module, name, seen):
        key = (id(module), name)
        if key in seen:
            return module.file
        seen.add(key)
        if name in module.defs:
            return module.file
        for segs, alias, _, _, _ in module.uses:
            if alias == name:
                target = self.resolve(module, segs, seen)
                return target or module.file
        for segs, alias, _, _, _ in module.uses:
            if alias == "*":
                start = self.start_module(module, segs)
                if start is None:
                    continue
                cur, rest = start
                while rest and rest[0] in cur.children:
                    cur = cur.children[rest[0]]
                    rest = rest[1:]
                if not rest and (name in cur.defs or any(a == name for _, a, *_ in cur.uses)):
                    return self.defining_file(cur, name, seen)
        return module.file

    def edges(self):
        """{(from_file, to_file): set of item descriptions}."""
        out = defaultdict(set)
        for module in self.modules:
            refs = []
            for segs, alias, is_reexport, s, e in module.uses:
                if is_reexport and alias != "*":
                    rest = module.own_code[:s] + module.own_code[e:]
                    if not re.search(r"\b" + re.escape(alias) + r"\b", rest):
                        continue
                elif is_reexport:
                    continue
                refs.append(segs)
            refs += module.code_paths
            for segs in refs:
                target = self.resolve(module, segs)
                if target and target != module.file:
                    out[(module.file, target)].add("::".join(segs))
        return out


def crate_roots(src):
    roots = []
    for name in ("lib.rs", "main.rs"):
        if os.path.exists(os.path.join(src, name)):
            roots.append(os.path.join(src, name))
    bin_dir = os.path.join(src, "bin")
    if os.path.isdir(bin_dir):
        for entry in sorted(os.listdir(bin_dir)):
            path = os.path.join(bin_dir, entry)
            if entry.endswith(".rs"):
                roots.append(path)
            elif os.path.exists(os.path.join(path, "main.rs")):
                roots.append(os.path.join(path, "main.rs"))
    return roots


def sccs(nodes, succ):
    index, low, on_stack, stack, result = {}, {}, set(), [], []
    counter = [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(succ.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            result.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            strong(v)
    return result


def check_crate(crate_dir, with_tests):
    src = os.path.join(crate_dir, "src")
    if not os.path.isdir(src):
        print(f"{crate_dir}: no src/ directory", file=sys.stderr)
        sys.exit(2)
    loops = []
    for root in crate_roots(src):
        crate = Crate(src, with_tests)
        crate.add_root(root)
        edges = crate.edges()
        succ = defaultdict(set)
        for a, b in edges:
            succ[a].add(b)
        for comp in sccs(set(crate.files), succ):
            if len(comp) > 1:
                loops.append((comp, edges))
    seen, unique = set(), []
    for comp, edges in loops:
        if tuple(comp) not in seen:
            seen.add(tuple(comp))
            unique.append((comp, edges))
    for comp, edges in unique:
        rel = lambda f: os.path.relpath(f, src)  # noqa: E731
        print(f"{crate_dir}: loop of {len(comp)} files: " + ", ".join(rel(f) for f in comp))
        members = set(comp)
        for (a, b), items in sorted(edges.items()):
            if a in members and b in members:
                shown = ", ".join(sorted(items)[:4]) + (" …" if len(items) > 4 else "")
                print(f"    {rel(a)} -> {rel(b)}: {shown}")
    if not unique:
        print(f"{crate_dir}: no loops")
    return len(unique)


def main(argv):
    with_tests = "--with-tests" in argv
    args = [a for a in argv if a != "--with-tests"]
    if not args or any(a.startswith("-") for a in args):
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    total = 0
    for arg in args:
        crate_dir = arg if os.path.isdir(arg) else os.path.join(repo, arg)
        total += check_crate(os.path.normpath(crate_dir), with_tests)
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
