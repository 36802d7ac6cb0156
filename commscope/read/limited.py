"""JSON and YAML from a user's files (a Ramble workspace's results, hardware description and Spack lock, ReFrame
reports, a --hardware file) are read here, within limits, so that a hostile or broken file is one refusal naming it,
never a hang, a memory blow-up or a traceback:

- size: a file larger than its limit (JSON_LIMIT, YAML_LIMIT) is refused before it is read; so is what is no
  regular file (a FIFO, a device);
- depth: a document nested deeper than MAX_DEPTH lists and mappings is refused;
- YAML aliases: a document whose aliases would expand to more than MAX_YAML_NODES nodes (billion laughs), or
  that holds itself, is refused; anchors that only shorten a file pass. YAML goes through the safe loader.

Every refusal is a BadProfile whose message names the file, what is wrong and what to do; one for a limit is an
Exceeded."""
from __future__ import annotations

import json
from pathlib import Path

import yaml

from commscope.read.files import BadProfile, open_regular

MIB = 1 << 20
JSON_LIMIT = 64 * MIB
YAML_LIMIT = MIB // 4     # a hardware description is a few KiB; pure YAML parsing costs seconds per MiB
MAX_DEPTH = 64
MAX_YAML_NODES = 1_000_000   # more than a YAML file of YAML_LIMIT can write out without aliases
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)   # libyaml's parser: a hundred times faster


class Exceeded(BadProfile):
    """A file beyond a limit: too large, nested too deep, aliases that expand too far."""


def read_bytes(path: Path, limit: int) -> bytes:
    """PATH's bytes, if it is a regular file of at most LIMIT bytes."""
    try:
        if not path.is_file():
            raise BadProfile(f"{path}: not a regular file; give the file itself")
        with open_regular(path) as f:
            data = f.read(limit + 1)
    except OSError as e:
        raise BadProfile(f"{path}: cannot be read ({e.strerror or e})") from None
    if len(data) > limit:
        size = f"{limit // MIB} MiB" if limit % MIB == 0 else f"{limit >> 10} KiB"
        raise Exceeded(f"{path}: larger than the {size} commscope reads from such a file; "
                       f"check that it is the file meant")
    return data


def _too_deep(path: Path) -> Exceeded:
    return Exceeded(f"{path}: nested deeper than {MAX_DEPTH} levels, which no file commscope reads is; "
                    f"check that it is the file meant")


def load_json(path: Path, limit: int = JSON_LIMIT, what: str = "JSON"):
    """The JSON document in PATH (module docstring); WHAT names what it should be in a refusal."""
    data = read_bytes(path, limit)
    try:
        doc = json.loads(data)
    except RecursionError:
        raise _too_deep(path) from None
    except (ValueError, UnicodeDecodeError) as e:   # JSONDecodeError, and integers too long to convert
        raise BadProfile(f"{path}: not {what} ({e})") from None
    stack = [(doc, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        for child in children:
            if isinstance(child, (dict, list)):
                if depth + 1 > MAX_DEPTH:
                    raise _too_deep(path)
                stack.append((child, depth + 1))
    return doc


def load_yaml(path: Path, limit: int = YAML_LIMIT, what: str = "YAML"):
    """The YAML document in PATH (module docstring), through yaml's safe loader (libyaml's when there); WHAT as for
    load_json. Its events are counted first: libyaml composes by recursion, and would crash on deep nesting."""
    data = read_bytes(path, limit)
    try:
        depth = aliases = 0
        for event in yaml.parse(data, Loader=SAFE_LOADER):
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    raise _too_deep(path)
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
            elif isinstance(event, yaml.AliasEvent):
                aliases += 1
        loader = SAFE_LOADER(data)
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            if aliases:
                _check_expansion(node, path)
            return loader.construct_document(node)
        finally:
            loader.dispose()
    except yaml.YAMLError as e:
        raise BadProfile(f"{path}: not {what} ({' '.join(str(e).split())})") from None


def _check_expansion(root: yaml.Node, path: Path) -> None:
    """Refuses a node graph deeper than MAX_DEPTH, holding itself, or whose aliases expand it to more than
    MAX_YAML_NODES nodes. Each node is counted once (an alias shares its anchor's node), without recursion."""
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    open_: set[int] = set()   # the nodes on the path being expanded
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        kids = _children(node)
        if finished:
            open_.discard(key)
            size[key] = 1 + sum(size[id(k)] for k in kids)
            depth[key] = 1 + max((depth[id(k)] for k in kids), default=0)
            if depth[key] > MAX_DEPTH + 1:   # + 1: a scalar is a level of nodes, not of nesting
                raise _too_deep(path)
            if size[key] > MAX_YAML_NODES:
                raise Exceeded(f"{path}: its aliases expand to more than {MAX_YAML_NODES:,} values (a billion "
                               f"laughs); write each value out, or refer to it fewer times")
            continue
        if key in size:
            continue
        if key in open_:
            raise Exceeded(f"{path}: an alias that holds itself (its aliases expand without end); "
                           f"write the value out instead")
        open_.add(key)
        stack.append((node, True))
        stack.extend((k, False) for k in kids)


def _children(node: yaml.Node) -> list:
    if isinstance(node, yaml.SequenceNode):
        return node.value
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []
