#!/usr/bin/env python3
"""Prints a library crate's public API, one item a line, from rustdoc's JSON output.

Used by scripts/api (which makes the JSON): `api.py CRATE.json` prints the surface an
embedder sees: each item reachable from the crate root by public paths (re-exports
followed), with its kind; function and method signatures; the public fields of structs
(a settings type with public fields shows up here); enum variants; the inherent methods and
the trait impls of each type, auto traits and blanket impls left out. Items are sorted by
path, so a diff of two listings shows what changed. Standard library only.
"""

import json
import sys


def render_type(ty):
    """A Rust type from its rustdoc JSON, as written in source (close enough to diff)."""
    if ty is None:
        return "()"
    (kind, value), = ty.items()
    if kind == "primitive":
        return value
    if kind == "generic":
        return value
    if kind == "resolved_path":
        return value["path"] + render_args(value.get("args"))
    if kind == "borrowed_ref":
        lifetime = (value["lifetime"] + " ") if value.get("lifetime") else ""
        mutable = "mut " if value["is_mutable"] else ""
        return f"&{lifetime}{mutable}{render_type(value['type'])}"
    if kind == "raw_pointer":
        return ("*mut " if value["is_mutable"] else "*const ") + render_type(value["type"])
    if kind == "slice":
        return f"[{render_type(value)}]"
    if kind == "array":
        return f"[{render_type(value['type'])}; {value['len']}]"
    if kind == "tuple":
        return "(" + ", ".join(render_type(t) for t in value) + ")"
    if kind == "impl_trait":
        return "impl " + " + ".join(render_bound(b) for b in value)
    if kind == "dyn_trait":
        traits = [t["trait"]["path"] + render_args(t["trait"].get("args")) for t in value["traits"]]
        if value.get("lifetime"):
            traits.append(value["lifetime"])
        return "dyn " + " + ".join(traits)
    if kind == "qualified_path":
        trait = value.get("trait")
        base = render_type(value["self_type"])
        if trait:
            return f"<{base} as {trait['path']}>::{value['name']}"
        return f"{base}::{value['name']}"
    if kind == "function_pointer":
        sig = value["sig"]
        return "fn(" + ", ".join(render_type(t) for _, t in sig["inputs"]) + ")" + render_output(sig["output"])
    if kind == "infer":
        return "_"
    return f"<{kind}>"


def render_args(args):
    if not args:
        return ""
    if "angle_bracketed" in args:
        parts = []
        for arg in args["angle_bracketed"]["args"]:
            (kind, value), = arg.items()
            if kind == "type":
                parts.append(render_type(value))
            elif kind == "lifetime":
                parts.append(value)
            elif kind == "const":
                parts.append(str(value.get("expr", "_")))
            else:
                parts.append("_")
        for constraint in args["angle_bracketed"].get("constraints", []):
            binding = constraint.get("binding", {})
            if "equality" in binding and "type" in binding["equality"]:
                parts.append(f"{constraint['name']} = {render_type(binding['equality']['type'])}")
        return "<" + ", ".join(parts) + ">" if parts else ""
    if "parenthesized" in args:
        value = args["parenthesized"]
        return "(" + ", ".join(render_type(t) for t in value["inputs"]) + ")" + render_output(value.get("output"))
    return ""


def render_bound(bound):
    if "trait_bound" in bound:
        trait = bound["trait_bound"]["trait"]
        return trait["path"] + render_args(trait.get("args"))
    if "outlives" in bound:
        return bound["outlives"]
    return "?"


def render_output(output):
    return "" if output is None else " -> " + render_type(output)


def render_fn(name, function):
    sig = function["sig"]
    inputs = []
    for arg, ty in sig["inputs"]:
        if arg == "self":
            inputs.append(
                {"&Self": "&self", "&mut Self": "&mut self", "Self": "self"}.get(render_type(ty), "self: " + render_type(ty))
            )
        else:
            inputs.append(f"{arg}: {render_type(ty)}")
    header = function["header"]
    prefix = ("const " if header["is_const"] else "") + ("async " if header["is_async"] else "")
    prefix += "unsafe " if header["is_unsafe"] else ""
    generics = [p["name"] for p in function["generics"]["params"] if not p["name"].startswith("'")]
    gen = "<" + ", ".join(generics) + ">" if generics else ""
    return f"{prefix}fn {name}{gen}(" + ", ".join(inputs) + ")" + render_output(sig["output"])


class Listing:
    def __init__(self, doc):
        self.index = doc["index"]
        self.paths = doc["paths"]
        self.lines = []
        self.seen = set()

    def item(self, item_id):
        return self.index.get(str(item_id))

    def module(self, module_id, prefix):
        module = self.item(module_id)
        for child_id in module["inner"]["module"]["items"]:
            child = self.item(child_id)
            if child is None or child["visibility"] != "public":
                continue
            inner = child["inner"]
            if "use" in inner:
                self.reexport(inner["use"], prefix)
            else:
                self.describe(child, f"{prefix}::{child['name']}")

    def reexport(self, use, prefix):
        target = self.item(use["id"]) if use.get("id") is not None else None
        if use["is_glob"]:
            if target is not None and "module" in target["inner"]:
                self.module(use["id"], prefix)
            else:
                self.lines.append(f"{prefix}::* (pub use {use['source']}::*)")
            return
        path = f"{prefix}::{use['name']}"
        if target is None:
            self.lines.append(f"{path} (pub use {use['source']}, from another crate)")
            return
        self.describe(target, path)

    def describe(self, item, path):
        (kind, inner), = item["inner"].items()
        attrs = " ".join(str(a) for a in item.get("attrs", []) if "non_exhaustive" in str(a))
        mark = " #[non_exhaustive]" if attrs else ""
        if kind == "module":
            self.lines.append(f"mod {path}")
            if item["id"] not in self.seen:
                self.seen.add(item["id"])
                self.module(item["id"], path)
            return
        if kind == "function":
            self.lines.append(f"{path}: " + render_fn(item["name"], inner))
        elif kind == "struct":
            self.lines.append(f"struct {path}{mark}")
            shape = inner["kind"]
            # A plain struct lists its fields; a tuple struct lists them with None for
            # each one rustdoc stripped (private); a unit struct is the string "unit".
            field_ids = []
            if isinstance(shape, dict):
                field_ids = shape["plain"]["fields"] if "plain" in shape else shape.get("tuple", [])
            for field_id in field_ids:
                field = self.item(field_id) if field_id is not None else None
                if field and field["visibility"] == "public":
                    self.lines.append(f"struct {path}: pub {field['name']}: {render_type(field['inner']['struct_field'])}")
            self.impls(path, inner["impls"])
        elif kind == "enum":
            self.lines.append(f"enum {path}{mark}")
            for variant_id in inner["variants"]:
                variant = self.item(variant_id)
                if variant:
                    self.lines.append(f"enum {path}: {variant['name']}")
            self.impls(path, inner["impls"])
        elif kind == "trait":
            self.lines.append(f"trait {path}")
            for member_id in inner["items"]:
                member = self.item(member_id)
                if member and "function" in member["inner"]:
                    self.lines.append(f"trait {path}: " + render_fn(member["name"], member["inner"]["function"]))
                elif member:
                    self.lines.append(f"trait {path}: {list(member['inner'])[0]} {member['name']}")
        elif kind == "constant":
            self.lines.append(f"const {path}: {render_type(inner['type'])}")
        elif kind == "static":
            self.lines.append(f"static {path}: {render_type(inner['type'])}")
        elif kind == "type_alias":
            self.lines.append(f"type {path} = {render_type(inner['type'])}")
        elif kind in ("macro", "proc_macro"):
            self.lines.append(f"macro {path}")
        else:
            self.lines.append(f"{kind} {path}")

    def impls(self, path, impl_ids):
        for impl_id in impl_ids:
            impl = self.item(impl_id)
            if impl is None:
                continue
            inner = impl["inner"]["impl"]
            if inner["is_synthetic"] or inner.get("blanket_impl") is not None:
                continue
            trait = inner.get("trait")
            if trait is not None:
                self.lines.append(f"impl {trait['path']}{render_args(trait.get('args'))} for {path}")
                continue
            for member_id in inner["items"]:
                member = self.item(member_id)
                if member is None or member["visibility"] != "public":
                    continue
                if "function" in member["inner"]:
                    self.lines.append(f"impl {path}: pub " + render_fn(member["name"], member["inner"]["function"]))
                elif "assoc_const" in member["inner"]:
                    self.lines.append(f"impl {path}: pub const {member['name']}")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: api.py CRATE.json")
    with open(sys.argv[1], encoding="utf-8") as file:
        doc = json.load(file)
    listing = Listing(doc)
    root = listing.item(doc["root"])
    crate = root["name"]
    listing.module(doc["root"], crate)
    top = [i for i in root["inner"]["module"]["items"] if (listing.item(i) or {}).get("visibility") == "public"]
    print(f"# {crate}: {len(top)} public items at the crate root (scripts/api; do not edit)")
    for line in sorted(set(listing.lines)):
        print(line)


if __name__ == "__main__":
    main()
