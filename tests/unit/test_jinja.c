/* test_jinja.c: the Jinja interpreter (src/chat/jinja_*.c). The expected renders were computed
 * by jinja2 3.1 configured as transformers renders chat templates (ImmutableSandboxedEnvironment
 * with trim_blocks, lstrip_blocks and loopcontrols; tojson as json.dumps) over the same context;
 * tests/reference/jinja2_render.py renders a case that way (the template in a file, `context`
 * below as the JSON); then errors naming their line, and the bounds against hostile templates. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat.h"
#include "util/util.h"

static const char context[] = "{\"messages\": [{\"role\": \"system\", \"content\": \" Be brief. \"}, {\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", \"content\": \"Hello\", \"tool_calls\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"arguments\": {\"a\": 1, \"b\": [true, null, 2.5]}}}]}], \"name\": \"World\", \"n\": 7, \"xs\": [3, 1, 2], \"d\": {\"b\": 2, \"a\": 1}, \"words\": [\"b\", \"B\", \"a\", \"C\", \"A\", \"c\"], \"people\": [{\"name\": \"bob\", \"age\": 30, \"pet\": {\"kind\": \"cat\"}}, {\"name\": \"Al\", \"age\": 25, \"pet\": {\"kind\": \"dog\"}}, {\"name\": \"al\", \"age\": 30, \"pet\": {\"kind\": \"ant\"}}], \"tree\": [{\"n\": \"a\", \"kids\": [{\"n\": \"a1\", \"kids\": []}, {\"n\": \"a2\", \"kids\": [{\"n\": \"a2x\", \"kids\": []}]}]}, {\"n\": \"b\", \"kids\": []}]}";
static const struct {
    const char *tmpl, *want;
} renders[] = {
    {"{{ 1 + 2 * 3 }}|{{ (1 + 2) * 3 }}|{{ 7 // 2 }}|{{ -7 // 2 }}|{{ 7 % 3 }}|{{ -7 % 3 }}|{{ 2 ** 10 }}|{{ 7 / 2 }}|{{ 1.5 + 1 }}",
     "7|9|3|-4|1|2|1024|3.5|2.5"},
    {"{{ 'a' ~ 1 ~ none ~ true }}|{{ 'ab' * 3 }}|{{ [1, 2] + [3] }}|{{ 'x' + 'y' }}",
     "a1NoneTrue|ababab|[1, 2, 3]|xy"},
    {"{{ 1 < 2 and 2 <= 2 and not 3 > 4 }}|{{ 'b' in 'abc' }}|{{ 4 not in xs }}|{{ 'a' in d }}|{{ 1 == 1.0 }}|{{ none or 'z' }}|{{ 0 and 1 }}",
     "True|True|True|True|True|z|0"},
    {"{{ 'yes' if n > 5 else 'no' }}|{{ 'yes' if n > 50 }}|{{ name[1:3] }}|{{ name[::-1] }}|{{ xs[-1] }}|{{ xs[1:] }}|{{ name[-3:] }}",
     "yes||or|dlroW|2|[1, 2]|rld"},
    {"{{ messages[0].content | trim }}|{{ name | upper }}|{{ name | lower }}|{{ 'hello world' | title }}|{{ 'hELLO' | capitalize }}|{{ name | length }}|{{ xs | length }}",
     "Be brief.|WORLD|world|Hello World|Hello|5|3"},
    {"{{ xs | join(', ') }}|{{ xs | first }}|{{ xs | last }}|{{ xs | list }}|{% for k, v in d | items %}{{ k }}{{ v }}{% endfor %}|{% for k, v in d | dictsort %}{{ k }}{{ v }}{% endfor %}|{{ undefined_thing | default('dflt') }}|{{ '' | default('e', true) }}",
     "3, 1, 2|3|2|[3, 1, 2]|b2a1|a1b2|dflt|e"},
    {"{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='content') | join }}|{{ messages | rejectattr('role', 'equalto', 'user') | map(attribute='role') | list }}|{{ messages | map(attribute='content') | map('trim') | join('/') }}",
     "Hi|['system', 'assistant']|Be brief./Hi/Hello"},
    {"{{ messages[2].tool_calls[0].function.arguments | tojson }}|{{ d | tojson(indent=2) }}|{{ 'q\"\\n' | tojson }}|{{ [] | tojson }}",
     "{\"a\": 1, \"b\": [true, null, 2.5]}|{\n  \"b\": 2,\n  \"a\": 1\n}|\"q\\\"\\n\"|[]"},
    {"{{ '42' | int + 1 }}|{{ 3 | string ~ 'x' }}|{{ xs | unique | list }}|{{ 'a-b-c'.split('-') }}|{{ ' a  b '.split() }}|{{ 'xxhixx'.strip('x') }}|{{ '  l'.lstrip() }}|{{ 'r  '.rstrip() }}|",
     "43|3x|[3, 1, 2]|['a', 'b', 'c']|['a', 'b']|hi|l|r|"},
    {"{{ name.startswith('Wo') }}|{{ name.endswith(('x', 'ld')) }}|{{ name.replace('o', '0') }}|{{ name.upper() }}|{{ d.get('a') }}|{{ d.get('z', 9) }}|{{ d.get('z') }}|{{ d.keys() | list }}|{{ d.values() | list }}|{% for p in d.items() %}{{ p[0] }}{{ p[1] }}{% endfor %}",
     "True|True|W0rld|WORLD|1|9|None|['b', 'a']|[2, 1]|b2a1"},
    {"{{ x is defined }}|{{ name is defined }}|{{ none is none }}|{{ name is string }}|{{ d is mapping }}|{{ xs is iterable }}|{{ n is number }}|{{ n is not string }}|{{ 3 is odd }}|{{ 1.5 is float }}",
     "False|True|True|True|True|True|True|True|True|True"},
    {"{% for m in messages %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.revindex }} {% endfor %}",
     "10TrueFalse33 21FalseFalse32 32FalseTrue31 "},
    {"{% for x in xs if x > 1 %}{{ x }}{{ loop.length }}{% else %}empty{% endfor %}|{% for x in [] %}{{ x }}{% else %}empty{% endfor %}|{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}",
     "3222|empty|b=2;a=1;"},
    {"{% for x in xs %}{% if x == 1 %}{% continue %}{% endif %}{% if x == 2 %}{% break %}{% endif %}{{ x }}{% endfor %}",
     "3"},
    {"{% set ns = namespace(found=false, c=0) %}{% for x in xs %}{% set ns.c = ns.c + x %}{% if x == 2 %}{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.found }} {{ ns.c }}",
     "True 6"},
    {"{% set y = 1 %}{% for x in xs %}{% set y = x %}{% endfor %}{{ y }}|{% set b %}inner {{ n }}{% endset %}{{ b | upper }}",
     "1|INNER 7"},
    {"{% macro greet(who, punct='!') %}Hello {{ who }}{{ punct }}{% endmacro %}{{ greet(name) }} {{ greet('you', punct='?') }}",
     "Hello World! Hello you?"},
    {"{% macro wrap() %}[{{ caller() }}]{% endmacro %}{% call wrap() %}inside {{ n }}{% endcall %}",
     "[inside 7]"},
    {"{% filter upper %}shout {{ name }}{% endfilter %}",
     "SHOUT WORLD"},
    {"{% if n > 10 %}big{% elif n > 5 %}mid{% else %}small{% endif %}",
     "mid"},
    {"a\n  {% if true %}\n  b\n  {% endif %}\nc\n{# note #}\nd {{- ' e ' -}} f\n{%- if true -%}  g  {%- endif %}\nh",
     "a\n  b\nc\nd e fgh"},
    {"{{ 'x' }}   {% if true %}y{% endif %}\n  {{ 'z' }}\n",
     "x   y  z"},
    {"{{ {'a': 1, 'b': 'two'} }}|{{ [1, 'a', none, true, 2.0] }}|{{ 1e3 if false else 0.1 }}|{{ (1, 2) | length }}|{{ \"it's\" ~ '' }}",
     "{'a': 1, 'b': 'two'}|[1, 'a', None, True, 2.0]|0.1|2|it's"},
    {"{{ 'ab\ncd' | indent(2) }}|{{ 'ab\ncd' | indent(2, true) }}|{{ messages | length }}",
     "ab\n  cd|  ab\n  cd|3"},
    {"{{ '\\u2581a\\x41' }}|{{ 'it\\'s' }}",
     "\u2581aA|it's"},
    {"{% filter upper %}a{% filter replace('B', 'x') %}b{{ 'B' }}{% endfilter %}c{% endfilter %}|{% filter trim %}  z  {% endfilter %}",
     "ABXC|z"},
    {"{{ (1, 'a') }}|{{ (1,) }}|{{ {'a': 1}.items() | list }}|{{ {'b': 2, 'a': 1} | dictsort }}|{{ ((1, 2), [3]) }}|{{ (1, 2) | tojson }}",
     "(1, 'a')|(1,)|[('a', 1)]|[('a', 1), ('b', 2)]|((1, 2), [3])|[1, 2]"},
    /* sort: case-insensitive by default, stable (reverse too), by attribute paths and lists of them */
    {"{{ words | sort }}|{{ words | sort(case_sensitive=true) }}|{{ words | sort(reverse=true) }}|{{ words | sort(true, true) }}|{{ xs | sort }}|{{ [2, 1.5, true, 0] | sort }}|{{ 'cab' | sort | join }}",
     "['a', 'A', 'b', 'B', 'C', 'c']|['A', 'B', 'C', 'a', 'b', 'c']|['C', 'c', 'b', 'B', 'a', 'A']|['c', 'b', 'a', 'C', 'B', 'A']|[1, 2, 3]|[0, True, 1.5, 2]|abc"},
    {"{{ people | sort(attribute='name') | map(attribute='name') | join(',') }}|{{ people | sort(attribute='age', reverse=true) | map(attribute='name') | join(',') }}|{{ people | sort(attribute='pet.kind') | map(attribute='name') | join(',') }}|{{ people | sort(attribute='age,name') | map(attribute='name') | join(',') }}|{{ d | sort }}|{{ [[2, 'b'], [1, 'z'], [2, 'a'], [1]] | sort }}",
     "Al,al,bob|bob,al,Al|al,bob,Al|Al,al,bob|['a', 'b']|[[1], [1, 'z'], [2, 'a'], [2, 'b']]"},
    {"{{ {'b': 1, 'A': 3, 'a': 2} | dictsort }}|{{ {'b': 1, 'A': 3, 'a': 2} | dictsort(true) }}|{{ {'b': 1, 'A': 3, 'a': 2} | dictsort(by='value') }}|{{ {'b': 1, 'A': 3, 'a': 2} | dictsort(reverse=true) }}|{{ people | map(attribute='pet') | map(attribute='kind') | sort | first }}|{{ people | sort(attribute='nope') | map(attribute='name') | join }}|{{ [['x', 2], ['y', 1]] | sort(attribute='1') }}",
     "[('A', 3), ('a', 2), ('b', 1)]|[('A', 3), ('a', 2), ('b', 1)]|[('b', 1), ('a', 2), ('A', 3)]|[('b', 1), ('A', 3), ('a', 2)]|ant|bobAlal|[['y', 1], ['x', 2]]"},
    /* the loop object's methods, and a loop kept past an inner loop */
    {"{% for x in xs %}{{ loop.cycle('odd', 'even') }}{{ loop.depth }}{{ loop.depth0 }} {% endfor %}|{% for x in [1, 1, 2, 2, 1] %}{% if loop.changed(x) %}{{ x }}{% endif %}{% endfor %}|{% for x in xs %}{{ loop.previtem }}-{{ loop.nextitem }};{% endfor %}",
     "odd10 even10 odd10 |121|-1;3-2;1-;"},
    {"{% for m in messages %}{% if loop.changed(m.role, 1) %}<{{ m.role }}>{% endif %}{% set outer = loop %}{% for y in [1, 2] %}{{ outer.cycle('a', 'b', 'c') }}{{ loop.cycle('x', 'y') }}{% endfor %}{% endfor %}",
     "<system>axay<user>bxby<assistant>cxcy"},
    /* recursive loops: loop(items) renders the body one level down, with the loop's filter and else */
    {"{% for t in tree recursive %}{{ loop.depth }}{{ t.n }}{% if t.kids %}({{ loop(t.kids) }}){% endif %}{% if not loop.last %},{% endif %}{% endfor %}",
     "1a(2a1,2a2(3a2x)),1b"},
    {"{% set pre = '>' %}{% for t in tree if t.n != 'b' recursive %}{{ pre }}{{ t.n }}:{{ loop.index }}/{{ loop.length }}{{ loop(t.kids) | upper }}{% else %}!{% endfor %}",
     ">a:1/1>A1:1/2!>A2:2/2>A2X:1/1!"},
};

/* render tmpl over ctx: 0 and *out, or the error code with the message in ms_err_msg() */
static int render(char **out, const char *tmpl, const char *ctx)
{
    chat_jinja *j = NULL;
    size_t len;
    int rc;

    *out = NULL;
    if ((rc = chat_jinja_parse(&j, tmpl, strlen(tmpl))) < 0)
        return rc;
    rc = chat_jinja_render_json(out, &len, j, ctx);
    if (rc == 0)
        ck_assert_uint_eq(len, strlen(*out));
    chat_jinja_free(j);
    return rc;
}

START_TEST(renders_as_jinja2)
{
    char *out;
    ck_assert_msg(render(&out, renders[_i].tmpl, context) == 0, "%s: %s", renders[_i].tmpl, ms_err_msg());
    ck_assert_str_eq(out, renders[_i].want);
    free(out);
}
END_TEST

static const struct {
    const char *tmpl, *want; /* the message's start */
} errors[] = {
    {"a\nb\n{% if x %}\nnever closed", "chat template line 4: unclosed 'if' block"},
    {"{{ 1 +\n }}", "chat template line 2: unexpected end of tag"},
    {"line1\n{% frobnicate %}", "chat template line 2: unknown statement 'frobnicate'"},
    {"{{ 'open }}", "chat template line 1: unterminated string"},
    {"\n\n{{ raise_exception('Conversation roles must alternate') }}",
     "chat template line 3: Conversation roles must alternate"},
    {"one\ntwo\n{{ 1 // 0 }}", "chat template line 3: division by zero"},
    {"{{ x.y.z }}", "chat template line 1: 'x' is undefined"},
    {"{{ x.y }}", "chat template line 1: 'x' is undefined"},
    {"{% set x = {} %}{{ x.y.z }}", "chat template line 1: 'z' of an undefined value"},
    {"{{ 'a' | nosuchfilter }}", "chat template line 1: filter 'nosuchfilter' is not implemented"},
    {"{{ nosuchfunc() }}", "chat template line 1: 'nosuchfunc' is undefined"},
    {"{{ 1 is nosuchtest }}", "chat template line 1: test 'nosuchtest' is not implemented"},
    {"{% for x in 5 %}{% endfor %}", "chat template line 1: this value is not iterable"},
    {"{{ 'a' + 1 }}", "chat template line 1: unsupported operand types"},
    {"\n{{ strftime_now() }}", "chat template line 2: strftime_now needs a string"},  /* found by fuzz_jinja */
    {"{{ [1] | selectattr }}", "chat template line 1: selectattr needs a string"},
    {"{{ [1, 'a'] | sort }}", "chat template line 1: '<' not supported between instances of 'str' and 'int'"},
    {"\n{{ [{'a': 1}, {'a': 2}] | sort }}", "chat template line 2: '<' not supported between instances of 'dict' and 'dict'"},
    {"{{ [none, 1] | sort }}", "chat template line 1: '<' not supported between instances of 'int' and 'NoneType'"},
    {"{{ [[1], ['a']] | sort }}", "chat template line 1: '<' not supported between instances of 'str' and 'int'"},
    {"{{ [{'a': 2}, {'b': 1}] | sort(attribute='a') }}", "chat template line 1: sort: an item lacks the attribute"},
    {"{{ {'a': 1} | dictsort(by='x') }}", "chat template line 1: dictsort: you can only sort by either 'key' or 'value'"},
    {"{% for x in [1] %}\n{{ loop([1]) }}{% endfor %}", "chat template line 2: tried to call a loop that is not recursive"},
    {"{% for x in [1] %}{{ loop.cycle() }}{% endfor %}", "chat template line 1: loop.cycle: no items for cycling given"},
};

START_TEST(errors_name_the_line)
{
    char *out;
    ck_assert_int_eq(render(&out, errors[_i].tmpl, "{}"), MS_EINVALID);
    ck_assert_msg(strncmp(ms_err_msg(), errors[_i].want, strlen(errors[_i].want)) == 0, "%s: got '%s'",
                  errors[_i].tmpl, ms_err_msg());
    ck_assert_ptr_null(out);
}
END_TEST

/* Hostile templates stop with an error, not a hang, a crash or all of memory. */
static const struct {
    const char *tmpl, *want;
} hostile[] = {
    {"{% set r = range(30000) %}{% for a in r %}{% for b in r %}{% endfor %}{% endfor %}", "steps"},
    {"{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "too deeply"},
    {"{% for x in [1] recursive %}{{ loop([1]) }}{% endfor %}", "too deep"},
    {"{% set ns = namespace(s='xxxxxxxxxxxxxxxx') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}"
     "{{ ns.s }}",
     "out of memory"},
    {"{{ 'x' * 1000000000000 }}", "size bound"},
    {"{{ 9223372036854775807 + 1 }}", "overflow"},
};

START_TEST(hostile_templates_are_bounded)
{
    char *out;
    ck_assert_int_eq(render(&out, hostile[_i].tmpl, "{}"), MS_EINVALID);
    ck_assert_msg(strstr(ms_err_msg(), hostile[_i].want), "%s: got '%s'", hostile[_i].tmpl, ms_err_msg());
}
END_TEST

START_TEST(deep_nesting_is_refused_at_parse)
{
    size_t n = 5000;
    char *t = malloc(n * 2 + 16), *out;
    memset(t, '(', n);
    strcpy(t + n, "1");
    memset(t + n + 1, ')', n);
    t[2 * n + 1] = '\0';
    char *tmpl = ms_strdup_printf("{{ %s }}", t);
    ck_assert_int_eq(render(&out, tmpl, "{}"), MS_EINVALID);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "nested too deeply"));
    free(tmpl);
    free(t);
}
END_TEST

START_TEST(bad_context_is_refused)
{
    char *out;
    ck_assert_int_eq(render(&out, "x", "[1, 2]"), MS_EINVALID);
    ck_assert_int_eq(render(&out, "x", "{\"a\": "), MS_EINVALID);
    ck_assert_ptr_nonnull(strstr(ms_err_msg(), "chat template context"));
}
END_TEST

static Suite *jinja_suite(void)
{
    Suite *s = suite_create("jinja");
    TCase *tc = tcase_create("core");

    tcase_add_loop_test(tc, renders_as_jinja2, 0, sizeof renders / sizeof *renders);
    tcase_add_loop_test(tc, errors_name_the_line, 0, sizeof errors / sizeof *errors);
    tcase_add_loop_test(tc, hostile_templates_are_bounded, 0, sizeof hostile / sizeof *hostile);
    tcase_add_test(tc, deep_nesting_is_refused_at_parse);
    tcase_add_test(tc, bad_context_is_refused);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(jinja_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
