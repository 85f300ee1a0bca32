"""Structural schemas of custom resources: defaulting, pruning, validation with
kube-apiserver's messages, and the CEL subset of x-kubernetes-validations.

The CEL subset (anything else fails the CRD at creation, never passes
silently): literals (int, uint, double, string, bool, null, lists), `self`,
`oldSelf` (transition rules), field access, indexing, `has()`, `size()`,
`! - * / % + < <= > >= == != in && || ?:`, the string methods startsWith,
endsWith, contains, matches, lowerAscii, upperAscii, the macros all, exists,
exists_one, map, filter, and the conversions int, uint, double, string."""
import copy
import json
import re



def gofmt(v):
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    if isinstance(v, (dict, list)):
        return json.dumps(v, separators=(",", ":"))
    return str(v)


def type_name(v):
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    return "null"


# ---- defaulting and pruning ------------------------------------------------

def default_and_prune(obj, schema, path="", unknown=None, root=True):
    """Apply defaults and drop unknown fields in place; unknown field paths are
    appended to `unknown`. Returns the (possibly replaced) value."""
    if unknown is None:
        unknown = []
    if not isinstance(schema, dict):
        return obj
    if isinstance(obj, dict):
        props = schema.get("properties")
        preserve = schema.get("x-kubernetes-preserve-unknown-fields")
        addl = schema.get("additionalProperties")
        if props is not None or (not preserve and addl is None):
            props = props or {}
            for k, sub in props.items():
                if k not in obj and isinstance(sub, dict) and "default" in sub:
                    obj[k] = copy.deepcopy(sub["default"])
            for k in list(obj.keys()):
                if root and k in ("apiVersion", "kind", "metadata"):
                    continue
                p = "%s.%s" % (path, k) if path else k
                if k in props:
                    obj[k] = default_and_prune(obj[k], props[k], p, unknown, False)
                elif addl is not None and addl is not False:
                    obj[k] = default_and_prune(obj[k], addl if isinstance(addl, dict) else {}, p, unknown, False)
                elif not preserve:
                    unknown.append(p)
                    del obj[k]
        elif isinstance(addl, dict):
            for k in list(obj.keys()):
                obj[k] = default_and_prune(obj[k], addl, "%s.%s" % (path, k) if path else k, unknown, False)
    elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
        for i in range(len(obj)):
            obj[i] = default_and_prune(obj[i], schema["items"], "%s[%d]" % (path, i), unknown, False)
    return obj


# ---- validation ------------------------------------------------------------

def validate(obj, schema, old=None, path="", errs=None, root=True):
    """Structural validation; returns [(reason, field, message)]."""
    if errs is None:
        errs = []
    if not isinstance(schema, dict):
        return errs
    if obj is None:
        if not schema.get("nullable") and path:
            # explicit null where a value is required
            t = schema.get("type")
            if t:
                errs.append(("FieldValueTypeInvalid", path, 'Invalid value: "null": %s in body must be of type %s: "null"' % (path, t)))
        return errs
    t = schema.get("type")
    if schema.get("x-kubernetes-int-or-string"):
        if not isinstance(obj, (int, str)) or isinstance(obj, bool):
            errs.append(("FieldValueTypeInvalid", path, 'Invalid value: "%s": %s in body must be of type integer,string: "%s"' % (type_name(obj), path, type_name(obj))))
            return errs
    elif t:
        ok = {"object": isinstance(obj, dict), "array": isinstance(obj, list), "string": isinstance(obj, str),
              "boolean": isinstance(obj, bool),
              "integer": isinstance(obj, int) and not isinstance(obj, bool) or (isinstance(obj, float) and obj.is_integer()),
              "number": isinstance(obj, (int, float)) and not isinstance(obj, bool)}.get(t, True)
        if not ok:
            errs.append(("FieldValueTypeInvalid", path, 'Invalid value: "%s": %s in body must be of type %s: "%s"' % (type_name(obj), path, t, type_name(obj))))
            return errs
    if "enum" in schema and obj not in schema["enum"]:
        errs.append(("FieldValueNotSupported", path, 'Unsupported value: %s: supported values: %s' % (gofmt(obj), ", ".join(gofmt(e) for e in schema["enum"]))))
    if isinstance(obj, (int, float)) and not isinstance(obj, bool):
        if "maximum" in schema:
            if schema.get("exclusiveMaximum") and obj >= schema["maximum"]:
                errs.append(("FieldValueInvalid", path, "Invalid value: %s: %s in body should be less than %s" % (gofmt(obj), path, gofmt(schema["maximum"]))))
            elif obj > schema["maximum"]:
                errs.append(("FieldValueInvalid", path, "Invalid value: %s: %s in body should be less than or equal to %s" % (gofmt(obj), path, gofmt(schema["maximum"]))))
        if "minimum" in schema:
            if schema.get("exclusiveMinimum") and obj <= schema["minimum"]:
                errs.append(("FieldValueInvalid", path, "Invalid value: %s: %s in body should be greater than %s" % (gofmt(obj), path, gofmt(schema["minimum"]))))
            elif obj < schema["minimum"]:
                errs.append(("FieldValueInvalid", path, "Invalid value: %s: %s in body should be greater than or equal to %s" % (gofmt(obj), path, gofmt(schema["minimum"]))))
        if "multipleOf" in schema and obj % schema["multipleOf"]:
            errs.append(("FieldValueInvalid", path, "Invalid value: %s: %s in body should be a multiple of %s" % (gofmt(obj), path, gofmt(schema["multipleOf"]))))
    if isinstance(obj, str):
        if "maxLength" in schema and len(obj) > schema["maxLength"]:
            errs.append(("FieldValueTooLong", path, "Too long: may not be longer than %d" % schema["maxLength"]))
        if "minLength" in schema and len(obj) < schema["minLength"]:
            errs.append(("FieldValueInvalid", path, "Invalid value: %s: %s in body should be at least %d chars long" % (gofmt(obj), path, schema["minLength"])))
        if "pattern" in schema and not re.search(schema["pattern"], obj):
            errs.append(("FieldValueInvalid", path, "Invalid value: %s: %s in body should match '%s'" % (gofmt(obj), path, schema["pattern"])))
    if isinstance(obj, list):
        if "maxItems" in schema and len(obj) > schema["maxItems"]:
            errs.append(("FieldValueTooMany", path, "Too many: %d: must have at most %d items" % (len(obj), schema["maxItems"])))
        if "minItems" in schema and len(obj) < schema["minItems"]:
            errs.append(("FieldValueInvalid", path, "Invalid value: %d: %s in body should have at least %d items" % (len(obj), path, schema["minItems"])))
        lt = schema.get("x-kubernetes-list-type")
        if lt == "set" or schema.get("uniqueItems"):
            seen = []
            for i, e in enumerate(obj):
                if e in seen:
                    errs.append(("FieldValueDuplicate", "%s[%d]" % (path, i), "Duplicate value: %s" % gofmt(e)))
                seen.append(e)
        elif lt == "map":
            keys = schema.get("x-kubernetes-list-map-keys") or []
            seen = []
            for i, e in enumerate(obj):
                k = tuple((e or {}).get(x) for x in keys) if isinstance(e, dict) else e
                if k in seen:
                    errs.append(("FieldValueDuplicate", "%s[%d]" % (path, i), "Duplicate value: %s" % gofmt({x: e.get(x) for x in keys})))
                seen.append(k)
        items = schema.get("items")
        if isinstance(items, dict):
            for i, e in enumerate(obj):
                o = None
                validate(e, items, o, "%s[%d]" % (path, i), errs, False)
    if isinstance(obj, dict):
        if "maxProperties" in schema and len(obj) > schema["maxProperties"]:
            errs.append(("FieldValueTooMany", path, "Too many: %d: must have at most %d items" % (len(obj), schema["maxProperties"])))
        for r in schema.get("required") or []:
            if r not in obj:
                errs.append(("FieldValueRequired", "%s.%s" % (path, r) if path else r, "Required value"))
        props = schema.get("properties") or {}
        addl = schema.get("additionalProperties")
        for k, v in obj.items():
            if root and k in ("apiVersion", "kind", "metadata"):
                continue
            sub = props.get(k, addl if isinstance(addl, dict) else None)
            if sub is not None:
                oldv = old.get(k) if isinstance(old, dict) else None
                validate(v, sub, oldv, "%s.%s" % (path, k) if path else k, errs, False)
    for rule in schema.get("x-kubernetes-validations") or []:
        prog = rule.get("_compiled")
        if prog is None:
            prog = compile_rule(rule.get("rule", ""))
        if prog.uses_old and old is None:
            continue
        try:
            ok = prog.eval({"self": obj, "oldSelf": old})
        except CelError as e:
            errs.append(("FieldValueInvalid", path or "<nil>", "Invalid value: %s: %s" % (gofmt(type_name(obj)), str(e))))
            continue
        if ok is not True:
            msg = rule.get("message")
            if rule.get("messageExpression"):
                try:
                    msg = str(compile_rule(rule["messageExpression"]).eval({"self": obj, "oldSelf": old}))
                except CelError:
                    pass
            if not msg:
                msg = "failed rule: %s" % rule.get("rule")
            fp = path
            if rule.get("fieldPath"):
                fp = (path + rule["fieldPath"]) if path else rule["fieldPath"].lstrip(".")
            reason = {"FieldValueForbidden": "Forbidden", "FieldValueRequired": "Required value",
                      "FieldValueDuplicate": "Duplicate value"}.get(rule.get("reason", ""))
            if reason:
                errs.append((rule["reason"], fp, "%s: %s" % (reason, msg)))
            else:
                errs.append(("FieldValueInvalid", fp or "<nil>", "Invalid value: %s: %s" % (gofmt(type_name(obj)), msg)))
    return errs


def check_schema_rules(schema, path, errs):
    """Compile every x-kubernetes-validations rule of a CRD schema; a rule
    outside the subset is a CRD validation error."""
    if not isinstance(schema, dict):
        return
    for i, rule in enumerate(schema.get("x-kubernetes-validations") or []):
        for key in ("rule", "messageExpression"):
            if key not in rule:
                continue
            try:
                compile_rule(rule[key])
            except CelError as e:
                errs.append(("FieldValueInvalid", "%s.x-kubernetes-validations[%d].%s" % (path, i, key),
                             "Invalid value: %s: compilation failed: %s" % (gofmt(rule[key]), e)))
    for k, sub in (schema.get("properties") or {}).items():
        check_schema_rules(sub, "%s.properties[%s]" % (path, k), errs)
    if isinstance(schema.get("items"), dict):
        check_schema_rules(schema["items"], path + ".items", errs)
    if isinstance(schema.get("additionalProperties"), dict):
        check_schema_rules(schema["additionalProperties"], path + ".additionalProperties", errs)


# ---- CEL subset ------------------------------------------------------------

class CelError(Exception):
    pass


_TOK = re.compile(r"""\s*(?:
    (?P<num>\d+\.\d+(?:[eE][-+]?\d+)?|\d+u?|0x[0-9a-fA-F]+)|
    (?P<str>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')|
    (?P<id>[A-Za-z_][A-Za-z0-9_]*)|
    (?P<op>&&|\|\||==|!=|<=|>=|[-+*/%<>!?:.,()\[\]{}]))""", re.X)

_KEYWORDS = {"true": True, "false": False, "null": None}


def _tokenize(s):
    toks, pos = [], 0
    s = s.rstrip()
    while pos < len(s):
        m = _TOK.match(s, pos)
        if not m or m.end() == pos:
            raise CelError("unsupported by the stand-in's CEL subset: unexpected character at %d in %r" % (pos, s))
        pos = m.end()
        for kind in ("num", "str", "id", "op"):
            if m.group(kind) is not None:
                toks.append((kind, m.group(kind)))
                break
    toks.append(("end", ""))
    return toks


_METHODS = {"size", "startsWith", "endsWith", "contains", "matches", "lowerAscii", "upperAscii",
            "all", "exists", "exists_one", "map", "filter"}
_FUNCS = {"size", "has", "int", "uint", "double", "string"}


class _Parser:
    def __init__(self, src):
        self.toks = _tokenize(src)
        self.i = 0
        self.uses_old = False

    def peek(self):
        return self.toks[self.i]

    def take(self, val=None):
        t = self.toks[self.i]
        if val is not None and t[1] != val:
            raise CelError("unsupported by the stand-in's CEL subset: expected %r, found %r" % (val, t[1]))
        self.i += 1
        return t

    def parse(self):
        e = self.ternary()
        if self.peek()[0] != "end":
            raise CelError("unsupported by the stand-in's CEL subset: unexpected %r" % self.peek()[1])
        return e

    def ternary(self):
        c = self.binary(0)
        if self.peek()[1] == "?":
            self.take("?")
            a = self.ternary()
            self.take(":")
            b = self.ternary()
            return ("?:", c, a, b)
        return c

    _PREC = [("||",), ("&&",), ("==", "!=", "<", "<=", ">", ">=", "in"), ("+", "-"), ("*", "/", "%")]

    def binary(self, level):
        if level == len(self._PREC):
            return self.unary()
        left = self.binary(level + 1)
        while self.peek()[1] in self._PREC[level] and self.peek()[0] in ("op", "id"):
            op = self.take()[1]
            right = self.binary(level + 1)
            left = (op, left, right)
        return left

    def unary(self):
        t = self.peek()
        if t[1] == "!":
            self.take()
            return ("!", self.unary())
        if t[1] == "-":
            self.take()
            return ("neg", self.unary())
        return self.postfix(self.primary())

    def args(self):
        self.take("(")
        out = []
        if self.peek()[1] != ")":
            out.append(self.ternary())
            while self.peek()[1] == ",":
                self.take(",")
                out.append(self.ternary())
        self.take(")")
        return out

    def primary(self):
        kind, val = self.take()
        if kind == "num":
            if val.endswith("u"):
                return ("lit", int(val[:-1]))
            if val.startswith("0x"):
                return ("lit", int(val, 16))
            return ("lit", float(val) if "." in val else int(val))
        if kind == "str":
            return ("lit", json.loads('"' + val[1:-1].replace('"', '\\"').replace("\\'", "'") + '"') if val[0] == "'" else json.loads(val))
        if kind == "id":
            if val in _KEYWORDS:
                return ("lit", _KEYWORDS[val])
            if self.peek()[1] == "(":
                if val not in _FUNCS:
                    raise CelError("unsupported by the stand-in's CEL subset: function %s" % val)
                return ("call", val, self.args())
            if val == "oldSelf":
                self.uses_old = True
            return ("var", val)
        if val == "(":
            e = self.ternary()
            self.take(")")
            return e
        if val == "[":
            items = []
            if self.peek()[1] != "]":
                items.append(self.ternary())
                while self.peek()[1] == ",":
                    self.take(",")
                    items.append(self.ternary())
            self.take("]")
            return ("list", items)
        raise CelError("unsupported by the stand-in's CEL subset: %r" % val)

    def postfix(self, e):
        while True:
            t = self.peek()
            if t[1] == ".":
                self.take()
                kind, name = self.take()
                if kind != "id":
                    raise CelError("unsupported by the stand-in's CEL subset: .%s" % name)
                if self.peek()[1] == "(":
                    if name not in _METHODS:
                        raise CelError("unsupported by the stand-in's CEL subset: method %s" % name)
                    if name in ("all", "exists", "exists_one", "map", "filter"):
                        self.take("(")
                        k, var = self.take()
                        if k != "id":
                            raise CelError("unsupported by the stand-in's CEL subset: macro variable")
                        self.take(",")
                        body = self.ternary()
                        self.take(")")
                        e = ("macro", name, e, var, body)
                    else:
                        e = ("method", name, e, self.args())
                else:
                    e = ("field", e, name)
            elif t[1] == "[":
                self.take()
                idx = self.ternary()
                self.take("]")
                e = ("index", e, idx)
            else:
                return e


class Program:
    def __init__(self, src):
        p = _Parser(src)
        self.ast = p.parse()
        self.uses_old = p.uses_old
        self.src = src

    def eval(self, env):
        return _ev(self.ast, env)


_cache = {}


def compile_rule(src):
    if src not in _cache:
        _cache[src] = Program(src)
    return _cache[src]


def _num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _ev(n, env):
    op = n[0]
    if op == "lit":
        return n[1]
    if op == "var":
        if n[1] not in env:
            raise CelError("undeclared reference to '%s'" % n[1])
        return env[n[1]]
    if op == "list":
        return [_ev(x, env) for x in n[1]]
    if op == "field":
        o = _ev(n[1], env)
        if not isinstance(o, dict) or n[2] not in o:
            raise CelError("no such key: %s" % n[2])
        return o[n[2]]
    if op == "index":
        o, i = _ev(n[1], env), _ev(n[2], env)
        try:
            return o[i]
        except (KeyError, IndexError, TypeError):
            raise CelError("no such key: %s" % i)
    if op == "call":
        name, args = n[1], n[2]
        if name == "has":
            a = args[0]
            if a[0] != "field":
                raise CelError("invalid argument to has() macro")
            o = _ev(a[1], env)
            return isinstance(o, dict) and a[2] in o
        vals = [_ev(a, env) for a in args]
        if name == "size":
            return len(vals[0])
        try:
            if name in ("int", "uint"):
                return int(vals[0])
            if name == "double":
                return float(vals[0])
        except (TypeError, ValueError) as e:
            raise CelError(str(e))
        if name == "string":
            v = vals[0]
            return ("true" if v else "false") if isinstance(v, bool) else str(v)
    if op == "method":
        name, o, args = n[1], _ev(n[2], env), [_ev(a, env) for a in n[3]]
        if name == "size":
            return len(o)
        if not isinstance(o, str):
            raise CelError("no such overload: %s" % name)
        if name == "startsWith":
            return o.startswith(args[0])
        if name == "endsWith":
            return o.endswith(args[0])
        if name == "contains":
            return args[0] in o
        if name == "matches":
            return re.search(args[0], o) is not None
        if name == "lowerAscii":
            return o.lower()
        if name == "upperAscii":
            return o.upper()
    if op == "macro":
        name, coll, var, body = n[1], _ev(n[2], env), n[3], n[4]
        items = list(coll.keys()) if isinstance(coll, dict) else list(coll)

        def run(x):
            e = dict(env)
            e[var] = x
            return _ev(body, e)
        if name == "all":
            return all(run(x) is True for x in items)
        if name == "exists":
            return any(run(x) is True for x in items)
        if name == "exists_one":
            return sum(1 for x in items if run(x) is True) == 1
        if name == "map":
            return [run(x) for x in items]
        if name == "filter":
            return [x for x in items if run(x) is True]
    if op == "!":
        v = _ev(n[1], env)
        if not isinstance(v, bool):
            raise CelError("no such overload: !%s" % type_name(v))
        return not v
    if op == "neg":
        return -_ev(n[1], env)
    if op == "?:":
        c = _ev(n[1], env)
        return _ev(n[2], env) if c is True else _ev(n[3], env)
    if op == "&&":
        a = _ev(n[1], env)
        if a is False:
            return False
        return _ev(n[2], env) is True and a is True
    if op == "||":
        a = _ev(n[1], env)
        if a is True:
            return True
        return _ev(n[2], env) is True
    a, b = _ev(n[1], env), _ev(n[2], env)
    try:
        if op == "==":
            return a == b and type(a) is type(b) or (_num(a) and _num(b) and a == b)
        if op == "!=":
            return not (a == b and type(a) is type(b) or (_num(a) and _num(b) and a == b))
        if op == "in":
            return a in b
        if op in ("<", "<=", ">", ">="):
            if type(a) is not type(b) and not (_num(a) and _num(b)):
                raise CelError("no such overload: %s %s %s" % (type_name(a), op, type_name(b)))
            return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]
        if op == "+":
            if type(a) is not type(b) and not (_num(a) and _num(b)):
                raise CelError("no such overload: %s + %s" % (type_name(a), type_name(b)))
            return a + b
        if op == "-":
            return a - b
        if op == "*":
            return a * b
        if op == "/":
            if isinstance(a, int) and isinstance(b, int):
                if b == 0:
                    raise CelError("division by zero")
                q = abs(a) // abs(b)
                return q if (a >= 0) == (b >= 0) else -q
            return a / b
        if op == "%":
            if b == 0:
                raise CelError("modulus by zero")
            return a - b * int(a / b)
    except TypeError:
        raise CelError("no such overload: %s %s %s" % (type_name(a), op, type_name(b)))
    raise CelError("unsupported by the stand-in's CEL subset: %s" % op)

