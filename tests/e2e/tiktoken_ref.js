// tiktoken_ref.js ENCODING COUNT SEED TEXTS IDS: write COUNT deterministic test strings (unicode
// letters in both cases, code, numbers, whitespace runs, emoji, CJK, marks, contractions) to
// TEXTS, each ended by a NUL byte (mstore tokenize --batch reads that), and the ids js-tiktoken's
// ENCODING (o200k_base, cl100k_base) gives each to IDS, one line each.
'use strict';
const fs = require('fs');
const { Tiktoken } = require('js-tiktoken/lite');
const [enc, count, seed, textsPath, idsPath] = process.argv.slice(2);
const ranks = require('js-tiktoken/ranks/' + enc);
const tk = new Tiktoken(ranks.default || ranks);

// mulberry32: the same strings on every run and machine
let st = Number(seed) >>> 0;
function rnd() {
  st = (st + 0x6d2b79f5) >>> 0;
  let t = st;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const pick = (a) => a[Math.floor(rnd() * a.length)];
const range = (lo, hi) => String.fromCodePoint(lo + Math.floor(rnd() * (hi - lo + 1)));

const words = ['the', 'The', 'THE', 'hello', 'World', 'HTTPServer', 'camelCase', 'snake_case', 'iPhone',
  'McDonald', 'école', 'ÉCOLE', 'École', 'Straße', 'STRASSE', 'naïve', 'ǅemal', 'ǈubljana', 'Ωmega',
  'Привет', 'МИР', 'мир', 'Ελλάδα', 'ΑΘΗΝΑ', 'हिन्दी', 'नमस्ते', 'العربية', 'עברית', 'ไทย', '한국어', '日本語',
  'ひらがな', 'カタカナ', '中文字符', 'ǲ', 'ﬁne', 'x²', 'İstanbul', 'ßẞ', 'e\u0301', 'A\u0308BC', 'ʰʲ'];
const contr = ["'s", "'S", "'t", "'re", "'RE", "'ve", "'m", "'ll", "'LL", "'d", "'D", "'x", "’s"];
const spaces = [' ', '  ', '   ', '\t', '\n', '\n\n', '\r\n', ' \n', '\t\t ', '\u00a0', '\u3000', '\u2009', '\u200b',
  '\u2028', '\f', '\v', '     \n  '];
const puncts = ['.', ',', '!', '?', '...', '--', '()', '{}', '[]', ';', ':', '"', "'", '/', '//', '/*', '*/', '->',
  '=>', '==', '!==', '&&', '||', '#', '@', '$', '%', '^', '&', '*', '+', '-', '_', '~', '`', '\\', '|', '«»', '“”',
  '。', '，', '、', '！', '？', '…', '—', '–', '•', '§', '€', '£', '¥', '©', '®', '™', '°', '±', '×', '÷'];
const emoji = ['😀', '🚀', '👍🏽', '👨‍👩‍👧‍👦', '🇫🇷', '❤️', '✨', '🤖', '1️⃣', '🏳️‍🌈', '☃', '⚙️'];
const code = ['def f(x):\n    return x+1\n', 'int main(void) { return 0; }', 'for (i = 0; i < n; i++) {',
  '    if x == None:\n\t\tpass', 'console.log("hi");', '<div class="a">b</div>', 'SELECT * FROM t WHERE id=42;',
  'https://example.com/a/b?c=d&e=f', 'C:\\Users\\x\\file.txt', '#include <stdio.h>', '$ ls -la /usr/bin',
  '{"key": [1, 2.5e-3, true, null]}', 'a/b/c/', 'x += 0x1F;', '// comment\n', '    \n    \n'];

function number() {
  const n = 1 + Math.floor(rnd() * 12);
  let s = '';
  for (let i = 0; i < n; i++) s += String(Math.floor(rnd() * 10));
  const r = rnd();
  if (r < 0.1) s = s.slice(0, 2) + '.' + s.slice(2);
  else if (r < 0.15) s = s + ',' + s;
  else if (r < 0.2) s = '-' + s;
  else if (r < 0.25) s = pick(['١٢٣', '४२', '௧௨', '½', 'Ⅻ', '①', '１２３']) + s;
  return s;
}

function piece() {
  const r = rnd();
  if (r < 0.30) return pick(words);
  if (r < 0.36) return pick(words) + pick(contr);
  if (r < 0.50) return pick(spaces);
  if (r < 0.60) return pick(puncts);
  if (r < 0.68) return number();
  if (r < 0.74) return pick(emoji);
  if (r < 0.80) return pick(code);
  if (r < 0.84) return range(0x4e00, 0x9fa5) + range(0x4e00, 0x9fa5);
  if (r < 0.87) return range(0xac00, 0xd7a3);
  if (r < 0.90) return range(0x3040, 0x30ff);
  if (r < 0.94) return range(0x00c0, 0x024f) + range(0x0370, 0x03ff) + range(0x0400, 0x04ff);
  if (r < 0.97) return range(0x0020, 0x007e) + range(0x0020, 0x007e) + range(0x0020, 0x007e);
  return range(0x0080, 0x2fff);   // anything up to CJK: marks, symbols, letters of all scripts
}

const texts = [], lines = [];
for (let i = 0; i < Number(count); i++) {
  const n = 1 + Math.floor(rnd() * 12);
  let s = '';
  for (let k = 0; k < n; k++) s += piece();
  s = s.replace(/<\|/g, '<');   // no special token's text
  // No U+0085 (NEL) or U+FEFF: JavaScript's \s takes U+FEFF and not NEL, where Unicode's
  // White_Space (tiktoken's Rust regex, llama.cpp, PCRE2) has it the other way round, so js-tiktoken
  // alone splits them differently.
  s = s.replace(/[\u0085\ufeff]/g, '');
  texts.push(s);
  lines.push(tk.encode(s).join(' '));
}
fs.writeFileSync(textsPath, texts.map((s) => s + '\0').join(''));
fs.writeFileSync(idsPath, lines.join('\n') + '\n');
