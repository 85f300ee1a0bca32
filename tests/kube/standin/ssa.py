"""Field ownership (`metadata.managedFields`) and server-side apply, after
kube-apiserver's field manager (structured-merge-diff), in the subset the
stand-in needs.

An object's fields are paths: `("f", name)` a field, `("k", '{"name":"c"}')`
an element of an associative list by its key, `("v", json)` an element of a
set, a whole atomic list a leaf. Lists are associative, sets or atomic as a
CRD's schema says (`x-kubernetes-list-type`, `x-kubernetes-list-map-keys`;
atomic when unsaid) or, for built-ins, as their strategic-merge keys say
(util.SMP_KEYS). Every write records its manager: an Update takes the fields
it changed from every other manager; an Apply owns exactly the fields of its
configuration, refuses to change a field another manager owns with another
value (409 with the apiserver's conflict message) unless forced, and removes
the fields it applied before and no longer applies when no one else owns
them."""
import copy
import json

from util import SMP_KEYS, ApiError, now_time

STRIP_META = ("name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp", "managedFields",
              "selfLink", "deletionTimestamp", "deletionGracePeriodSeconds")
MEMBER = "\0member"       # the value of a path that is an element, not a leaf


def _child_schema(sch, name):
    if not isinstance(sch, dict):
        return None
    props = sch.get("properties") or {}
    if name in props:
        return props[name]
    ap = sch.get("additionalProperties")
    return ap if isinstance(ap, dict) else None


def _list_kind(sch, name, crd):
    """("map", keys) | ("set",) | ("atomic",) of the list field `name` (its schema sch)."""
    if crd:
        t = (sch or {}).get("x-kubernetes-list-type")
        if t == "map":
            return ("map", tuple((sch or {}).get("x-kubernetes-list-map-keys") or ()))
        return ("set",) if t == "set" else ("atomic",)
    if name not in SMP_KEYS:
        return ("atomic",)
    key = SMP_KEYS[name]
    if key is None:
        return ("set",)
    return ("map", key if isinstance(key, tuple) else (key,))


def _key(item, keys, pick_first):
    if pick_first:      # SMP_KEYS' alternatives: the first the element has
        keys = [next((k for k in keys if k in item), keys[0])]
    return json.dumps({k: item.get(k) for k in keys if k in item}, sort_keys=True, separators=(",", ":"))


def _walk(v, sch, crd, path, out):
    for name, x in v.items():
        p = path + (("f", name),)
        sub = _child_schema(sch, name)
        if isinstance(x, dict) and x:
            _walk(x, sub, crd, p, out)
        elif isinstance(x, list):
            kind = _list_kind(sub, name, crd)
            if kind[0] == "atomic" or any(not isinstance(e, dict) for e in x) and kind[0] == "map":
                out[p] = x
            elif kind[0] == "set":
                for e in x:
                    out[p + (("v", json.dumps(e, sort_keys=True)),)] = e
            else:
                items = (sub or {}).get("items")
                for e in x:
                    kp = p + (("k", _key(e, kind[1], not crd and len(kind[1]) > 1)),)
                    out[kp] = MEMBER
                    _walk(e, items, crd, kp, out)
        else:
            out[p] = x


def fields(rt, obj, sub=""):
    """{path: value} of obj's fields a manager can own (for `sub` "status": the status only)."""
    obj = obj or {}
    top = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
    md = {k: v for k, v in (top.get("metadata") or {}).items() if k not in STRIP_META}
    top.pop("metadata", None)
    if md:
        top["metadata"] = md
    if sub == "status":
        top = {"status": top["status"]} if isinstance(top.get("status"), dict) else {}
    elif rt.status:
        top.pop("status", None)
    out = {}
    _walk(top, rt.schema(), rt.crd is not None, (), out)
    return out


# ---- managedFields <-> {(manager, operation, subresource): [apiVersion, time, paths]}

def _to_v1(paths):
    root = {}
    for p in sorted(paths, key=lambda p: [list(e) for e in p]):
        node = root
        for t, v in p:
            node = node.setdefault("%s:%s" % (t, v), {})
    _dots(root, paths, ())
    return root


def _dots(node, paths, path):
    """A path that is a member and also has children carries ".": {}."""
    for k, child in node.items():
        if k == ".":
            continue
        t, _, v = k.partition(":")
        p = path + ((t, v),)
        if child and p in paths:
            child["."] = {}
        _dots(child, paths, p)


def _from_v1(node, path, out):
    for k, child in (node or {}).items():
        if k == ".":
            out.add(path)
            continue
        t, _, v = k.partition(":")
        p = path + ((t, v),)
        if child:
            _from_v1(child, p, out)
        else:
            out.add(p)


def entries(obj):
    out = {}
    for e in ((obj or {}).get("metadata") or {}).get("managedFields") or []:
        paths = set()
        _from_v1(e.get("fieldsV1"), (), paths)
        out[(e.get("manager", ""), e.get("operation", ""), e.get("subresource", ""))] = [e.get("apiVersion"), e.get("time"), paths]
    return out


def managed_fields(ents):
    out = []
    for (m, op, sub), (av, t, paths) in ents.items():
        if not paths:
            continue
        e = {"manager": m, "operation": op, "apiVersion": av, "time": t, "fieldsType": "FieldsV1", "fieldsV1": _to_v1(paths)}
        if sub:
            e["subresource"] = sub
        out.append(e)
    return out


def _same(a, b):
    strip = lambda es: {k: v[2] for k, v in es.items() if v[2]}
    return strip(a) == strip(b)


def manager_of(ctx):
    """The request's fieldManager, else what kube-apiserver derives from the User-Agent."""
    if ctx.field_manager:
        return ctx.field_manager
    if ctx.user_agent:
        return ctx.user_agent.split("/")[0][:128]
    return "kubelet" if ctx.user.startswith("system:node:") else ctx.user.rpartition(":")[2] or "unknown"


# ---- the writes

def track(rt, old, new, ctx, sub=""):
    """new's managedFields after an Update by ctx's manager (old None: a create), or after the Apply
    ctx.apply decided; a write that changes nothing else keeps old's (and their times)."""
    before = entries(old)
    if ctx.apply is not None:
        ents = ctx.apply
    else:
        ents = entries({"metadata": {"managedFields": ctx.managed_base}}) if ctx.managed_base is not None else copy.deepcopy(before)
        of = fields(rt, old, sub) if old is not None else {}
        nf = fields(rt, new, sub)
        changed = {p for p, v in nf.items() if p not in of or of[p] != v}
        removed = set(of) - set(nf)
        me = (manager_of(ctx), "Update", sub)
        for k, e in ents.items():
            e[2] -= removed
            if k != me:
                e[2] -= changed
        if changed:
            ents.setdefault(me, [rt.api_version, None, set()])
            ents[me][2] |= changed
            ents[me][0], ents[me][1] = rt.api_version, now_time()
    present = set(fields(rt, new)) | set(fields(rt, new, "status"))   # what the object still has
    for e in ents.values():
        e[2] &= present
    if old is not None and _same(ents, before):
        return copy.deepcopy(old["metadata"].get("managedFields") or [])
    return managed_fields(ents)


def _print_manager(key, ents):
    m, op, sub = key
    s = '"%s"' % m
    if sub:
        s += ' with subresource "%s"' % sub
    if op == "Update":
        av, t = ents[key][0], ents[key][1]
        return "%s using %s" % (s, av) + (" at %s" % t if t else "")
    return s


def _path_str(p):
    out = ""
    for t, v in p:
        if t == "f":
            out += "." + v
        elif t == "k":
            out += "[" + ",".join("%s=%s" % (k, json.dumps(x)) for k, x in json.loads(v).items()) + "]"
        else:
            out += "[=%s]" % v
    return out


def conflict_error(conflicts, ents):
    """409 as kube-apiserver words it: conflicts [(manager key, path)]."""
    causes = [{"type": "FieldManagerConflict", "message": "conflict with %s" % _print_manager(k, ents), "field": _path_str(p)}
              for k, p in conflicts]
    if len(conflicts) == 1:
        msg = "Apply failed with 1 conflict: conflict with %s: %s" % (_print_manager(conflicts[0][0], ents), _path_str(conflicts[0][1]))
    else:
        by = {}
        for k, p in conflicts:
            by.setdefault(_print_manager(k, ents), []).append(_path_str(p))
        lines = []
        for m in sorted(by):
            lines.append("conflicts with %s:" % m)
            lines += ["- %s" % p for p in by[m]]
        msg = "Apply failed with %d conflicts: %s" % (len(conflicts), "\n".join(lines))
    return ApiError(409, "Conflict", msg, {"causes": causes})


def _merge(cur, cfg, sch, crd):
    out = dict(cur) if isinstance(cur, dict) else {}
    for name, x in cfg.items():
        sub = _child_schema(sch, name)
        if isinstance(x, dict) and x and isinstance(out.get(name), dict):
            out[name] = _merge(out[name], x, sub, crd)
        elif isinstance(x, list) and isinstance(out.get(name), list):
            kind = _list_kind(sub, name, crd)
            if kind[0] == "set":
                out[name] = out[name] + [e for e in x if e not in out[name]]
            elif kind[0] == "map" and all(isinstance(e, dict) for e in x + out[name]):
                pick = not crd and len(kind[1]) > 1
                merged = list(out[name])
                for e in x:
                    k = _key(e, kind[1], pick)
                    i = next((i for i, m in enumerate(merged) if _key(m, kind[1], pick) == k), None)
                    if i is None:
                        merged.append(copy.deepcopy(e))
                    else:
                        merged[i] = _merge(merged[i], e, (sub or {}).get("items"), crd)
                out[name] = merged
            else:
                out[name] = copy.deepcopy(x)
        else:
            out[name] = copy.deepcopy(x)
    return out


def _remove(obj, path, sch, crd):
    """Delete the field, element or leaf at path (parents left empty go too, as in the apiserver)."""
    t, v = path[0]
    if t == "f":
        if not isinstance(obj, dict) or v not in obj:
            return
        if len(path) == 1:
            del obj[v]
            return
        sub = _child_schema(sch, v)
        child = obj[v]
        if isinstance(child, list):
            kind = _list_kind(sub, v, crd)
            t2, v2 = path[1]
            pick = not crd and len(kind[1] if kind[0] == "map" else ()) > 1
            for i, e in enumerate(child):
                if (t2 == "v" and json.dumps(e, sort_keys=True) == v2) or \
                        (t2 == "k" and isinstance(e, dict) and _key(e, kind[1], pick) == v2):
                    if len(path) == 2:
                        child.pop(i)
                    else:
                        _remove(e, path[2:], (sub or {}).get("items"), crd)
                    break
            if not child:
                del obj[v]
        else:
            _remove(child, path[1:], sub, crd)
            if isinstance(child, dict) and not child:
                del obj[v]


def apply(rt, cur, cfg, ctx, force, sub=""):
    """The object an Apply of cfg by ctx's manager makes of cur (None: create); sets ctx.apply."""
    me = (manager_of(ctx), "Apply", sub)
    ents = entries(cur)
    want = fields(rt, cfg, sub)
    have = fields(rt, cur, sub) if cur is not None else {}
    conflicts = []
    for k, e in ents.items():
        if k == me:
            continue
        for p in sorted(e[2] & set(want), key=lambda p: [list(x) for x in p]):
            if want[p] != MEMBER and have.get(p) != want[p]:
                conflicts.append((k, p))
    if conflicts and not force:
        raise conflict_error(conflicts, ents)
    for k, p in conflicts:
        ents[k][2].discard(p)
    body = {k: v for k, v in cfg.items() if k not in ("apiVersion", "kind")}
    if sub == "status":
        body = {"status": body.get("status") or {}}
    md = {k: v for k, v in (body.get("metadata") or {}).items() if k not in STRIP_META}
    body.pop("metadata", None)
    if md:
        body["metadata"] = md
    out = _merge(copy.deepcopy(cur) if cur is not None else {}, body, rt.schema(), rt.crd is not None)
    prev = ents.get(me, [None, None, set()])[2]
    others = set().union(*[e[2] for k, e in ents.items() if k != me]) if len(ents) > (me in ents) else set()
    for p in sorted(prev - set(want) - others, key=len, reverse=True):
        if not any(o[:len(p)] == p for o in others):     # an element another manager owns a field of stays
            _remove(out, p, rt.schema(), rt.crd is not None)
    ents[me] = [rt.api_version, now_time(), set(want)]
    ctx.apply = ents
    for k in ("apiVersion", "kind"):
        if k in cfg:
            out[k] = cfg[k]
    return out
