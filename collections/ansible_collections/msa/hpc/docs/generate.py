# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""Write one Markdown page per module, plugin and role of msa.hpc from ansible-doc --json (docs/generated/), and
the content list of the collection's README.md (--readme), which --check-readme compares with the README."""

import argparse
import difflib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

COLLECTION = "msa.hpc"
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# ansible-doc plugin type → directory under plugins/ (a type is documented when its directory exists).
PLUGIN_DIRS = {"module": "modules", "inventory": "inventory", "filter": "filter", "test": "test",
               "lookup": "lookup", "callback": "callback", "connection": "connection", "become": "become",
               "cache": "cache", "vars": "vars", "strategy": "strategy", "shell": "shell", "netconf": "netconf",
               "cliconf": "cliconf", "httpapi": "httpapi"}
TITLES = {"module": "Modules", "inventory": "Inventory plugins", "filter": "Filter plugins", "test": "Test plugins",
          "lookup": "Lookup plugins", "callback": "Callback plugins", "connection": "Connection plugins",
          "role": "Roles"}

MARKUP = [
    (re.compile(r"L\(([^)]+?),\s*([^)]+)\)"), r"[\1](\2)"),
    (re.compile(r"U\(([^)]+)\)"), r"<\1>"),
    (re.compile(r"I\(([^)]+)\)"), r"*\1*"),
    (re.compile(r"B\(([^)]+)\)"), r"**\1**"),
    (re.compile(r"RV\(([^)]+)\)"), r"`\1`"),
    (re.compile(r"[CMOVEP]\(((?:[^()]|\([^()]*\))+)\)"), r"`\1`"),
    (re.compile(r"HORIZONTALLINE"), "\n---\n"),
]


def markup(text):
    """Ansible documentation markup (C(), O(), V(), I(), L(), U(), ...) as Markdown."""
    if isinstance(text, list):
        return "\n\n".join(markup(t) for t in text)
    text = "" if text is None else str(text)
    for pattern, replacement in MARKUP:
        text = pattern.sub(replacement, text)
    return text


def cell(text):
    return markup(text).replace("|", "\\|").replace("\n\n", "<br>").replace("\n", " ")


def value(text):
    if text is None:
        return ""
    if isinstance(text, str):
        return "`%s`" % text.replace("|", "\\|") if text else '`""`'
    return "`%s`" % json.dumps(text).replace("|", "\\|")


class DocError(Exception):
    """ansible-doc could not render something."""


def ansible_doc(binary, *args):
    # Document this copy of the collection: its ansible_collections/ parent goes first on the collections path.
    paths = [str(ROOT.parents[2])] + [p for p in os.environ.get("ANSIBLE_COLLECTIONS_PATH", "").split(os.pathsep) if p]
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.pathsep.join(paths), ANSIBLE_NOCOLOR="1")
    proc = subprocess.run([binary, *args], capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        raise DocError(" ".join(proc.stderr.split()) or "%s %s exited %d" % (binary, " ".join(args), proc.returncode))
    return json.loads(proc.stdout or "{}")


def documents(binary, kind, names, failures):
    """ansible-doc --json of ``names``, leaving out (and recording in ``failures``) those that do not render."""
    names = list(names)
    while names:
        try:
            return ansible_doc(binary, "-t", kind, "--json", *names)
        except DocError as exc:
            broken = [n for n in names if re.search(re.escape(n) + r"\b", str(exc))][:1]
            if not broken:      # the message names no plugin: find the broken ones one by one
                docs = {}
                for name in names:
                    try:
                        docs.update(ansible_doc(binary, "-t", kind, "--json", name))
                    except DocError as one:
                        failures.append("%s (%s): %s" % (name, kind, one))
                return docs
            failures.append("%s (%s): %s" % (broken[0], kind, exc))
            names.remove(broken[0])
    return {}


def option_rows(options, prefix=""):
    for name in sorted(options or {}):
        spec = options[name] or {}
        kind = spec.get("type", "str")
        if spec.get("elements"):
            kind += " of " + spec["elements"]
        description = cell(spec.get("description"))
        if spec.get("aliases"):
            description += "<br>Aliases: " + ", ".join("`%s`" % a for a in spec["aliases"])
        if spec.get("choices"):
            choices = spec["choices"]
            shown = choices if isinstance(choices, list) else list(choices)
            description += "<br>Choices: " + ", ".join(value(c) for c in shown)
        required = "yes" if spec.get("required") else ""
        yield "| `%s%s` | %s | %s | %s | %s |" % (prefix, name, kind, required, value(spec.get("default")), description)
        if spec.get("suboptions"):
            yield from option_rows(spec["suboptions"], prefix + name + ".")


def options_table(options, heading="Options"):
    if not options:
        return ["## %s" % heading, "", "None.", ""]
    return (["## %s" % heading, "", "| option | type | required | default | description |",
             "|---|---|---|---|---|"] + list(option_rows(options)) + [""])


def return_rows(values, prefix=""):
    for name in sorted(values or {}):
        spec = values[name] or {}
        sample = ""
        if "sample" in spec:
            sample = "<br>Sample: " + value(spec["sample"])
        returned, description = cell(spec.get("returned")), cell(spec.get("description"))
        yield "| `%s%s` | %s | %s | %s%s |" % (prefix, name, spec.get("type", ""), returned, description, sample)
        if spec.get("contains"):
            yield from return_rows(spec["contains"], prefix + name + ".")


def plugin_page(kind, fqcn, data):
    doc = data.get("doc") or {}
    lines = ["# %s (%s)" % (fqcn, kind), "", markup(doc.get("short_description")), ""]
    if doc.get("version_added"):
        lines += ["Added in msa.hpc %s." % doc["version_added"], ""]
    lines += ["## Description", "", markup(doc.get("description")), ""]
    if doc.get("requirements"):
        lines += ["## Requirements", ""] + ["- " + markup(r) for r in doc["requirements"]] + [""]
    lines += options_table(doc.get("options"), "Parameters" if kind != "module" else "Options")
    if doc.get("attributes"):
        lines += ["## Attributes", "", "| attribute | support | details |", "|---|---|---|"]
        for name in sorted(doc["attributes"]):
            attribute = doc["attributes"][name] or {}
            support = attribute.get("support", "")
            if attribute.get("platforms"):
                support += " (%s)" % ", ".join(attribute["platforms"] if isinstance(attribute["platforms"], list)
                                               else [attribute["platforms"]])
            details = cell(attribute.get("details") or attribute.get("description"))
            lines.append("| %s | %s | %s |" % (name, support, details))
        lines.append("")
    if doc.get("notes"):
        lines += ["## Notes", ""] + ["- " + markup(n) for n in doc["notes"]] + [""]
    if data.get("examples"):
        lines += ["## Examples", "", "```yaml", data["examples"].strip("\n"), "```", ""]
    if data.get("return"):
        lines += ["## Return values", "", "| key | type | returned | description |", "|---|---|---|---|"]
        lines += list(return_rows(data["return"])) + [""]
    if doc.get("seealso"):
        lines += ["## See also", ""]
        for item in doc["seealso"]:
            target = item.get("module") or item.get("plugin") or item.get("name") or item.get("ref")
            text = "`%s`" % target if not item.get("link") else "[%s](%s)" % (target, item["link"])
            lines.append("- %s: %s" % (text, markup(item.get("description", ""))))
        lines.append("")
    lines += ["Source: `%s`." % os.path.relpath(doc.get("filename", ""), ROOT) if doc.get("filename") else "", ""]
    return "\n".join(lines)


def role_page(fqcn, data):
    name = fqcn.split(".", 2)[2]
    role_dir = Path(data.get("path") or ROOT) / "roles" / name
    defaults_file = role_dir / "defaults" / "main.yml"
    defaults = (yaml.safe_load(defaults_file.read_text()) if defaults_file.exists() else None) or {}
    lines = ["# %s (role)" % fqcn, ""]
    for entry, spec in sorted((data.get("entry_points") or {}).items()):
        title = "Entry point `%s`" % entry if entry != "main" else "Entry point `main`"
        lines += ["## %s" % title, "", markup(spec.get("short_description")), ""]
        if spec.get("description"):
            lines += [markup(spec["description"]), ""]
        options = spec.get("options") or {}
        if not options:
            lines += ["No variables.", ""]
            continue
        lines += ["| variable | type | required | default (defaults/main.yml) | description |", "|---|---|---|---|---|"]
        for option in sorted(options):
            spec_o = options[option] or {}
            kind = spec_o.get("type", "str")
            if spec_o.get("elements"):
                kind += " of " + spec_o["elements"]
            default = defaults.get(option, spec_o.get("default"))
            description = cell(spec_o.get("description"))
            if spec_o.get("choices"):
                description += "<br>Choices: " + ", ".join(value(c) for c in spec_o["choices"])
            lines.append("| `%s` | %s | %s | %s | %s |" % (option, kind, "yes" if spec_o.get("required") else "",
                                                           value(default) if option in defaults or "default" in spec_o else "",
                                                           description))
        lines.append("")
    lines += ["Variables are checked against `meta/argument_specs.yml` before the role's first task: a value of "
              "the wrong type stops the play there, naming the variable.", "",
              "Source: `roles/%s/`." % name, ""]
    return "\n".join(lines)


README_BEGIN = "<!-- BEGIN content: generated by docs/generate.py --readme from ansible-doc; do not edit -->"
README_END = "<!-- END content -->"
README_TITLES = {"module": "Modules", "role": "Roles", "inventory": "Inventory plugins", "filter": "Filter plugins",
                 "callback": "Callback plugins", "strategy": "Strategy plugins", "vars": "Vars plugins"}
README_USAGE = {"module": "`ansible-doc msa.hpc.<name>`", "role": "`ansible-doc -t role msa.hpc.<name>`",
                "inventory": "`ansible-doc -t inventory msa.hpc.<name>`",
                "filter": "`ansible-doc -t filter msa.hpc.<name>`",
                "callback": "`ansible-doc -t callback msa.hpc.<name>`",
                "strategy": "`ansible-doc -t strategy msa.hpc.<name>`",
                "vars": "`ansible-doc -t vars msa.hpc.<name>`"}


def listing(binary, kinds):
    """``ansible-doc -t <kind> -l msa.hpc --json`` of every kind: {kind: {fqcn: summary}}."""
    found = {}
    for kind in kinds:
        listed = ansible_doc(binary, "-t", kind, "-l", COLLECTION, "--json")
        found[kind] = {n: listed[n] for n in sorted(listed) if n.startswith(COLLECTION + ".")}
    return found


def readme_block(found):
    """The README's content list: one table per kind (modules, roles with their entry points, plugins)."""
    order = list(README_TITLES) + sorted(k for k in found if k not in README_TITLES)
    lines = [README_BEGIN, ""]
    for kind in order:
        names = found.get(kind)
        if names is None:
            continue
        title = README_TITLES.get(kind, TITLES.get(kind, kind.title() + " plugins"))
        if not names:
            lines += ["### %s" % title, "", "None.", ""]
            continue
        lines += ["### %s" % title, "", "Documentation: %s." % README_USAGE.get(kind, "`ansible-doc -t %s`" % kind), ""]
        if kind == "role":
            lines += ["| role | entry point | what it does |", "|---|---|---|"]
            for fqcn, summary in names.items():
                entries = ((summary or {}).get("entry_points") or {}) if isinstance(summary, dict) else {"main": summary}
                for entry in sorted(entries, key=lambda e: (e != "main", e)):
                    lines.append("| `%s` | `%s` | %s |" % (fqcn.split(".", 2)[2], entry, cell(entries[entry])))
        else:
            lines += ["| name | what it does |", "|---|---|"]
            for fqcn, summary in names.items():
                lines.append("| `%s` | %s |" % (fqcn.split(".", 2)[2], cell(summary)))
        lines.append("")
    lines.append(README_END)
    return "\n".join(lines)


def readme_with(text, block):
    """``text`` (a README) with its generated block replaced by ``block``."""
    start, end = text.find(README_BEGIN), text.find(README_END)
    if start < 0 or end < start:
        raise DocError("the README has no %s ... %s block" % (README_BEGIN, README_END))
    return text[:start] + block + text[end + len(README_END):]


def readme(binary, path, check):
    """Write (or with ``check``, compare) the README's generated block; the exit status of --readme/--check-readme."""
    path = Path(path)
    current = path.read_text()
    kinds = plugin_types(ROOT) + [k for k in README_TITLES if k not in plugin_types(ROOT)]
    wanted = readme_with(current, readme_block(listing(binary, kinds)))
    if current == wanted:
        print("%s is up to date" % path)
        return 0
    if check:
        sys.stdout.writelines(difflib.unified_diff(current.splitlines(True), wanted.splitlines(True),
                                                   str(path), "generated", n=1))
        print("%s is stale: run scripts/docs.sh --readme" % path, file=sys.stderr)
        return 1
    path.write_text(wanted)
    print("wrote the content list of %s" % path)
    return 0


def plugin_types(root):
    types = [kind for kind, directory in PLUGIN_DIRS.items() if (root / "plugins" / directory).is_dir()]
    if (root / "roles").is_dir():
        types.append("role")
    return types


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ansible-doc", default=str(Path(sys.executable).parent / "ansible-doc"),
                        help="ansible-doc to run (default: the one next to this Python)")
    parser.add_argument("--output", default=str(HERE / "generated"), help="directory of the generated pages")
    parser.add_argument("--readme", nargs="?", const=str(ROOT / "README.md"), metavar="PATH",
                        help="write the content list of the README (default: the collection's) instead of the pages")
    parser.add_argument("--check-readme", nargs="?", const=str(ROOT / "README.md"), metavar="PATH",
                        help="exit 1 and show the difference when the README's content list is stale")
    args = parser.parse_args(argv)
    if args.readme or args.check_readme:
        try:
            return readme(args.ansible_doc, args.check_readme or args.readme, check=bool(args.check_readme))
        except DocError as exc:
            print("could not list the collection: %s" % exc, file=sys.stderr)
            return 2
    output = Path(args.output)
    output.mkdir(parents=True, exist_ok=True)
    for old in output.rglob("*.md"):
        old.unlink()
    index = ["# msa.hpc reference", "", "Generated by `scripts/docs.sh` from `ansible-doc --json`; do not edit.", ""]
    failures = []
    for kind in plugin_types(ROOT):
        listed = ansible_doc(args.ansible_doc, "-t", kind, "-l", COLLECTION, "--json")
        names = sorted(n for n in listed if n.startswith(COLLECTION + "."))
        if not names:
            continue
        docs = documents(args.ansible_doc, kind, names, failures)
        (output / kind).mkdir(exist_ok=True)
        index += ["## %s" % TITLES.get(kind, kind.title() + " plugins"), ""]
        for fqcn in names:
            data = docs.get(fqcn)
            if not data:
                if not any(f.startswith(fqcn + " ") for f in failures):
                    failures.append("%s (%s): ansible-doc returned nothing" % (fqcn, kind))
                index.append("- %s: **documentation does not render** (`ansible-doc -t %s %s`)" % (fqcn, kind, fqcn))
                continue
            short = fqcn.split(".", 2)[2]
            page = role_page(fqcn, data) if kind == "role" else plugin_page(kind, fqcn, data)
            (output / kind / (short + ".md")).write_text(page.rstrip("\n") + "\n")
            summary = listed[fqcn]
            if isinstance(summary, dict):     # roles: {entry_points: {main: short description}}
                summary = (summary.get("entry_points") or {}).get("main", "")
            index.append("- [%s](%s/%s.md): %s" % (fqcn, kind, short, markup(summary)))
        index.append("")
    (output / "README.md").write_text("\n".join(index).rstrip("\n") + "\n")
    print("wrote %d pages to %s" % (len(list(output.rglob("*.md"))) - 1, output))
    for failure in failures:
        print("could not document %s" % failure, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
