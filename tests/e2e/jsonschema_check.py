"""jsonschema_check.py FILE [SCHEMA]: FILE must parse as JSON and, given SCHEMA, validate against it.

The subset of JSON Schema that src/grammar compiles, written independently of it so that the
e2e tests check mstore --format against a second reading of the schema (python3-jsonschema is
not needed). Exits non-zero naming the path and the broken rule."""
import json, re, sys
def resolve(root, ref):
    at = root
    for tok in ref[2:].split('/') if ref != '#' else []:
        tok = tok.replace('~1', '/').replace('~0', '~')
        at = at[int(tok)] if isinstance(at, list) else at[tok]
    return at
FORMATS = {
    'date': r'\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])',
    'time': r'([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d{1,9})?(Z|[+-]([01]\d|2[0-3]):[0-5]\d)',
    'uuid': r'[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}',
}
FORMATS['date-time'] = FORMATS['date'] + 'T' + FORMATS['time']
def typeok(v, t):
    return {'null': v is None, 'boolean': isinstance(v, bool), 'string': isinstance(v, str),
            'integer': isinstance(v, int) and not isinstance(v, bool),
            'number': isinstance(v, (int, float)) and not isinstance(v, bool),
            'object': isinstance(v, dict), 'array': isinstance(v, list)}[t]
def check(v, s, root, path='$'):
    def no(why): raise SystemExit(f'{path}: {why}: {json.dumps(v)[:200]}')
    if s is True: return
    if '$ref' in s: return check(v, resolve(root, s['$ref']), root, path)
    if 'const' in s and v != s['const']: no('not the const')
    if 'enum' in s and v not in s['enum']: no('not in enum')
    for k in ('anyOf', 'oneOf'):
        if k in s:
            for sub in s[k]:
                try: check(v, sub, root, path); break
                except SystemExit: pass
            else: no(f'matches no {k}')
    if s.get('nullable') and v is None: return
    if 'type' in s:
        ts = s['type'] if isinstance(s['type'], list) else [s['type']]
        if not any(typeok(v, t) for t in ts): no(f'not of type {ts}')
    if isinstance(v, str):
        if len(v) < s.get('minLength', 0) or len(v) > s.get('maxLength', 1 << 60): no('length')
        if 'format' in s and not re.fullmatch(FORMATS[s['format']], v): no('format')
        if 'pattern' in s and not re.search(s['pattern'], v): no('pattern')
    if isinstance(v, int) and not isinstance(v, bool):
        if v < s.get('minimum', -1e99) or v > s.get('maximum', 1e99): no('range')
    if isinstance(v, dict):
        props = s.get('properties', {})
        for r in s.get('required', []):
            if r not in v: no(f'lacks {r}')
        for k, x in v.items():
            if k in props: check(x, props[k], root, f'{path}.{k}')
            elif s.get('additionalProperties', not props) is False: no(f'extra key {k}')
            elif isinstance(s.get('additionalProperties'), dict): check(x, s['additionalProperties'], root, f'{path}.{k}')
    if isinstance(v, list):
        if len(v) < s.get('minItems', 0) or len(v) > s.get('maxItems', 1 << 60): no('item count')
        pre = s.get('prefixItems', [])
        for i, x in enumerate(v):
            sub = pre[i] if i < len(pre) else s.get('items', True)
            if sub is False: no('too many items')
            check(x, sub, root, f'{path}[{i}]')
text = open(sys.argv[1], encoding='utf-8').read()
v = json.loads(text)
schema = json.load(open(sys.argv[2])) if len(sys.argv) > 2 else {'type': 'object'}
check(v, schema, schema)
