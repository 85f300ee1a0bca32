"""Shared pieces of the stand-in: API errors as Status bodies, times, selectors,
the three patch formats and the JSONPath subset of printer columns."""
import copy
import datetime
import json
import random
import re
import time


class ApiError(Exception):
    """An error that reaches the client as a Status body."""

    def __init__(self, code, reason, message, details=None, headers=None):
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or {}

    def status(self):
        st = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
              "message": self.message, "reason": self.reason, "code": self.code}
        if self.details is not None:
            st["details"] = self.details
        return st


def not_found(rt, name):
    return ApiError(404, "NotFound", '%s "%s" not found' % (rt.qualified(), name),
                    {"name": name, "group": rt.group, "kind": rt.plural})


def bad_request(msg):
    return ApiError(400, "BadRequest", msg)


def invalid(rt, name, causes):
    """422 Invalid with field causes [(type, field, message)]."""
    texts = ["%s: %s" % (f, m) if f else m for (_t, f, m) in causes]
    body = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    kind = rt.kind + ("." + rt.group if rt.group else "")
    return ApiError(422, "Invalid", '%s "%s" is invalid: %s' % (kind, name, body),
                    {"name": name, "group": rt.group, "kind": rt.kind,
                     "causes": [{"reason": t, "message": m, "field": f} for (t, f, m) in causes]})


def conflict_modified(rt, name):
    return ApiError(409, "Conflict",
                    'Operation cannot be fulfilled on %s "%s": the object has been modified; '
                    'please apply your changes to the latest version and try again' % (rt.qualified(), name),
                    {"name": name, "group": rt.group, "kind": rt.plural})


def now_time():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_micro():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(s):
    if not s:
        return None
    s = s.replace("Z", "+00:00")
    try:
        return datetime.datetime.fromisoformat(s).timestamp()
    except ValueError:
        return None


def human_age(ts):
    """kubectl's HumanDuration of the time since ts (RFC 3339)."""
    t = parse_time(ts)
    if t is None:
        return "<unknown>"
    d = int(time.time() - t)
    if d < 0:
        return "0s"
    if d < 120:
        return "%ds" % d
    m = d // 60
    if m < 10:
        return "%dm%ds" % (m, d % 60) if d % 60 else "%dm" % m
    if m < 180:
        return "%dm" % m
    h = m // 60
    if h < 8:
        return "%dh%dm" % (h, m % 60) if m % 60 else "%dh" % h
    if h < 48:
        return "%dh" % h
    days = h // 24
    if h < 24 * 8:
        return "%dd%dh" % (days, h % 24) if h % 24 else "%dd" % days
    if days < 365 * 2:
        return "%dd" % days
    return "%dy" % (days // 365)


_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"


def gen_suffix(n=5):
    return "".join(random.choice(_NAME_CHARS) for _ in range(n))


def parse_bool(v):
    """Go's strconv.ParseBool."""
    return v in ("1", "t", "T", "true", "TRUE", "True")


# ---- selectors -------------------------------------------------------------

_LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                        r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


def _split_top(s):
    """Split on commas outside parentheses."""
    parts, depth, cur = [], 0, ""
    for ch in s:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return [p.strip() for p in parts if p.strip()]


def parse_label_selector(s):
    """-> list of (key, op, values); op in = != in notin exists !exists."""
    reqs = []
    if not s:
        return reqs
    for part in _split_top(s):
        m = re.match(r"^(\S+)\s+(in|notin)\s+\((.*)\)$", part)
        if m:
            key, op, vals = m.group(1), m.group(2), [v.strip() for v in m.group(3).split(",") if v.strip()]
        elif part.startswith("!"):
            key, op, vals = part[1:].strip(), "!exists", []
        elif "!=" in part:
            key, v = part.split("!=", 1)
            key, op, vals = key.strip(), "!=", [v.strip()]
        elif "==" in part:
            key, v = part.split("==", 1)
            key, op, vals = key.strip(), "=", [v.strip()]
        elif "=" in part:
            key, v = part.split("=", 1)
            key, op, vals = key.strip(), "=", [v.strip()]
        else:
            key, op, vals = part, "exists", []
        if not _LABEL_KEY.match(key) or any(not re.match(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$", v) for v in vals):
            raise bad_request('unable to parse requirement: found \'%s\', expected: identifier' % part)
        reqs.append((key, op, vals))
    return reqs


def label_match(reqs, labels):
    labels = labels or {}
    for key, op, vals in reqs:
        has = key in labels
        v = labels.get(key)
        if op == "=" and v != vals[0]:
            return False
        if op == "!=" and has and v == vals[0]:
            return False
        if op == "in" and v not in vals:
            return False
        if op == "notin" and has and v in vals:
            return False
        if op == "exists" and not has:
            return False
        if op == "!exists" and has:
            return False
    return True


def selector_from_labelselector(ls):
    """metav1.LabelSelector -> requirements."""
    reqs = []
    if ls is None:
        return reqs
    for k, v in (ls.get("matchLabels") or {}).items():
        reqs.append((k, "=", [v]))
    for e in ls.get("matchExpressions") or []:
        op = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!exists"}[e["operator"]]
        reqs.append((e["key"], op, e.get("values") or []))
    return reqs


def parse_field_selector(s, allowed):
    reqs = []
    if not s:
        return reqs
    for part in _split_top(s):
        if "!=" in part:
            k, v = part.split("!=", 1)
            op = "!="
        elif "==" in part:
            k, v = part.split("==", 1)
            op = "="
        elif "=" in part:
            k, v = part.split("=", 1)
            op = "="
        else:
            raise bad_request('invalid selector: \'%s\'; can\'t understand \'%s\'' % (s, part))
        k = k.strip()
        if k not in allowed:
            raise bad_request('field label not supported: %s' % k)
        reqs.append((k, op, v.strip()))
    return reqs


def field_value(obj, path):
    cur = obj
    for p in path.split("."):
        if not isinstance(cur, dict):
            return ""
        cur = cur.get(p)
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


def field_match(reqs, obj):
    for k, op, v in reqs:
        got = field_value(obj, k)
        if (got == v) != (op == "="):
            return False
    return True


# ---- patches ---------------------------------------------------------------

def merge_patch(target, patch):
    """RFC 7386."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if not isinstance(target, dict):
        target = {}
    out = dict(target)
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def _ptr(path):
    if path == "":
        return []
    if not path.startswith("/"):
        raise ValueError("invalid JSON pointer %r" % path)
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _walk(doc, toks):
    cur = doc
    for t in toks:
        if isinstance(cur, list):
            cur = cur[int(t)]
        elif isinstance(cur, dict):
            cur = cur[t]
        else:
            raise KeyError(t)
    return cur


class JsonPatchTestFailed(Exception):
    pass


def json_patch(doc, ops):
    """RFC 6902; raises ValueError/KeyError/IndexError on bad paths and
    JsonPatchTestFailed when a test op fails."""
    doc = copy.deepcopy(doc)
    if not isinstance(ops, list):
        raise ValueError("json patch must be an array")
    for op in ops:
        kind = op.get("op")
        toks = _ptr(op.get("path", ""))

        def put(d, toks, val, replace):
            if not toks:
                return val
            parent = _walk(d, toks[:-1])
            last = toks[-1]
            if isinstance(parent, list):
                if last == "-":
                    if replace:
                        raise IndexError("replace at -")
                    parent.append(val)
                else:
                    i = int(last)
                    if replace:
                        parent[i] = val
                    else:
                        if i > len(parent) or i < 0:
                            raise IndexError("index out of range")
                        parent.insert(i, val)
            elif isinstance(parent, dict):
                if replace and last not in parent:
                    raise KeyError(last)
                parent[last] = val
            else:
                raise KeyError(last)
            return d

        def remove(d, toks):
            parent = _walk(d, toks[:-1])
            last = toks[-1]
            if isinstance(parent, list):
                return parent.pop(int(last))
            return parent.pop(last)

        if kind == "add":
            doc = put(doc, toks, copy.deepcopy(op["value"]), False)
        elif kind == "remove":
            remove(doc, toks)
        elif kind == "replace":
            doc = put(doc, toks, copy.deepcopy(op["value"]), True)
        elif kind in ("move", "copy"):
            frm = _ptr(op["from"])
            val = copy.deepcopy(_walk(doc, frm))
            if kind == "move":
                remove(doc, frm)
            doc = put(doc, toks, val, False)
        elif kind == "test":
            try:
                got = _walk(doc, toks)
            except (KeyError, IndexError, ValueError):
                got = object()
            if got != op.get("value"):
                raise JsonPatchTestFailed("testing value %s failed" % op.get("path"))
        else:
            raise ValueError('Unexpected kind: %s' % kind)
    return doc


# merge keys of the built-in types' lists (patchStrategy "merge"), by field
# name; a tuple: the first of them the element has (a container's ports
# merge by containerPort, a Service's by port)
SMP_KEYS = {
    "containers": "name", "initContainers": "name", "ephemeralContainers": "name",
    "env": "name", "volumes": "name", "volumeMounts": "mountPath", "volumeDevices": "devicePath",
    "ports": ("containerPort", "port"), "imagePullSecrets": "name", "conditions": "type",
    "ownerReferences": "uid", "hostAliases": "ip", "addresses": "type",
    "topologySpreadConstraints": "topologyKey", "finalizers": None,
    "webhooks": "name",     # Validating/MutatingWebhookConfiguration
}


def strategic_merge(target, patch, field=None):
    """Strategic merge patch for built-in kinds: maps merge like RFC 7386,
    lists with a merge key merge by it, `$patch`, `$retainKeys`,
    `$deleteFromPrimitiveList/…` and `$setElementOrder/…` directives."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        p = {k: v for k, v in patch.items() if k != "$patch"}
        return copy.deepcopy(p)
    if patch.get("$patch") == "delete":
        return None
    out = dict(target) if isinstance(target, dict) else {}
    retain = patch.get("$retainKeys")
    for k, v in patch.items():
        if k in ("$patch", "$retainKeys") or k.startswith("$setElementOrder/"):
            continue
        if k.startswith("$deleteFromPrimitiveList/"):
            name = k.split("/", 1)[1]
            out[name] = [x for x in (out.get(name) or []) if x not in v]
            continue
        if v is None:
            out.pop(k, None)
        elif isinstance(v, list) and k in SMP_KEYS:
            out[k] = _smp_list(out.get(k) or [], v, SMP_KEYS[k])
        elif isinstance(v, dict):
            r = strategic_merge(out.get(k), v, k)
            if r is None:
                out.pop(k, None)
            else:
                out[k] = r
        else:
            out[k] = copy.deepcopy(v)
    if retain is not None:
        out = {k: v for k, v in out.items() if k in retain}
    return out


def _smp_list(cur, patch, key):
    if key is None:  # a set of primitives: union, keeping order
        out = list(cur)
        for v in patch:
            if v not in out:
                out.append(v)
        return out
    out = [copy.deepcopy(x) for x in cur]
    for item in patch:
        if not isinstance(item, dict):
            return copy.deepcopy(patch)
        if item.get("$patch") == "replace":
            return [copy.deepcopy({k: v for k, v in i.items() if k != "$patch"}) for i in patch]
        k = next((k for k in key if k in item), key[0]) if isinstance(key, tuple) else key
        kv = item.get(k)
        idx = next((i for i, x in enumerate(out) if isinstance(x, dict) and x.get(k) == kv), None)
        if item.get("$patch") == "delete":
            if idx is not None:
                out.pop(idx)
            continue
        if idx is None:
            out.append(strategic_merge({}, item))
        else:
            out[idx] = strategic_merge(out[idx], item)
    return out


# ---- JSONPath (printer columns) --------------------------------------------

def jsonpath(obj, path):
    """The subset printer columns use: .a.b, [n], [*], [?(@.k=="v")].
    Returns a list of matches."""
    toks = re.findall(r'\.([A-Za-z0-9_\-$]+)|\[(\d+|\*)\]|\[\?\(@\.([A-Za-z0-9_.\-]+)\s*==\s*["\']([^"\']*)["\']\)\]|\.?\[\'([^\']+)\'\]', path)
    cur = [obj]
    for name, idx, fk, fv, quoted in toks:
        nxt = []
        for c in cur:
            if name or quoted:
                key = name or quoted
                if isinstance(c, dict) and key in c:
                    nxt.append(c[key])
            elif idx:
                if isinstance(c, list):
                    if idx == "*":
                        nxt.extend(c)
                    elif int(idx) < len(c):
                        nxt.append(c[int(idx)])
            elif fk:
                if isinstance(c, list):
                    for e in c:
                        if isinstance(e, dict) and field_value(e, fk) == fv:
                            nxt.append(e)
        cur = nxt
    return cur


def canonical(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))
