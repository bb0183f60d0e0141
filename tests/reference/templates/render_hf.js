// render_hf.js TEMPLATE CONTEXT.json: the template rendered by npm @huggingface/jinja over the
// context (messages, tools, add_generation_prompt, bos_token, eos_token), written to stdout;
// exit 3 with the message on stderr when the template fails there.
const fs = require("fs");
const { Template } = require("@huggingface/jinja");

const [tmplPath, ctxPath] = process.argv.slice(2);
const ctx = JSON.parse(fs.readFileSync(ctxPath, "utf8"));
// @huggingface/jinja has its own strftime_now (local time, now): fix its clock at
// SOURCE_DATE_EPOCH, in UTC, as mstore's strftime_now reads it.
if (process.env.SOURCE_DATE_EPOCH) {
    const fixed = Number(process.env.SOURCE_DATE_EPOCH) * 1000, RealDate = Date;
    process.env.TZ = "UTC";
    global.Date = class extends RealDate {
        constructor(...a) { super(...(a.length ? a : [fixed])); }
        static now() { return fixed; }
    };
}
let out;
try {
    out = new Template(fs.readFileSync(tmplPath, "utf8")).render(ctx);
} catch (e) {
    process.stderr.write(String(e && e.message ? e.message : e) + "\n");
    process.exit(3);
}
process.stdout.write(out);
