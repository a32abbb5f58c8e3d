// judger view: model text as a person reads it. A policy writes this text, so it goes in as text
// (never as HTML), and what it holds may not change the page around it:
// - the math in it is found the way its authors meant it (a "$" before an amount is money) and
//   rendered by KaTeX one formula at a time, each in a box it cannot paint outside of; a formula
//   KaTeX cannot render, or throws on (a RangeError is no ParseError: throwOnError does not catch
//   it), stays the text the model wrote, and so does the whole cell if anything else fails;
// - characters that are not seen but change what is seen (a bidi override makes "024" read "420")
//   are shown, as their code point, instead of acting.
"use strict";

// the C0 and C1 controls but tab, newline and carriage return, and the format characters (bidi
// controls and marks, zero-width characters, tags): shown as "U+202E", never left to act
const HIDDEN = /(?![\t\n\r])[\p{Cc}\p{Cf}]/gu;
const HIDDEN_ONE = /(?![\t\n\r])[\p{Cc}\p{Cf}]/u;
const HIDDEN_NAMES = {
  0x061c: "arabic letter mark", 0x200b: "zero width space", 0x200c: "zero width non-joiner",
  0x200d: "zero width joiner", 0x200e: "left-to-right mark", 0x200f: "right-to-left mark",
  0x202a: "left-to-right embedding", 0x202b: "right-to-left embedding", 0x202c: "pop directional formatting",
  0x202d: "left-to-right override", 0x202e: "right-to-left override", 0x2066: "left-to-right isolate",
  0x2067: "right-to-left isolate", 0x2068: "first strong isolate", 0x2069: "pop directional isolate",
  0xfeff: "zero width no-break space",
};

function codePoint(ch) { return "U+" + ch.codePointAt(0).toString(16).toUpperCase().padStart(4, "0"); }

// ``text`` with each hidden character replaced by its code point (for places that hold only text)
function shown(text) { return String(text).replace(HIDDEN, codePoint); }

// ``text`` as nodes: its hidden characters as marked code points
function plain(text) {
  const s = String(text);
  const out = document.createDocumentFragment();
  let last = 0;
  for (const m of s.matchAll(HIDDEN)) {
    if (m.index > last) out.append(s.slice(last, m.index));
    const mark = document.createElement("span");
    mark.className = "ctl";
    mark.title = HIDDEN_NAMES[m[0].codePointAt(0)] || "invisible character";
    mark.textContent = codePoint(m[0]);
    out.append(mark);
    last = m.index + m[0].length;
  }
  if (last < s.length) out.append(s.slice(last));
  return out;
}

// --- where the math is ---------------------------------------------------------------------------

const SPACE = /\s/;
const DIGIT = /\d/;

// a command and the braced text it takes ("\times", "\text{ apples}") are no words
const COMMANDS = /\\[A-Za-z]+\s*(\{[^{}]*\})?/g;
const AMOUNT_START = /^\s*\.?\d/;
const WORDS = /(^|[\s,.;:!?()])[A-Za-z]{2,}(?=$|[\s,.;:!?()])/;

// what a pair of "$" holds is prose, not math, when it holds another "$" ("$20+$2=$": amounts), or
// when it starts with a digit and holds words or a line break ("$80,000 and then puts in $50,000",
// money), or holds words over lines (GSM8K's "= $<<2+3=5>>5\nThe food ... = $") or between spaces
// ("costs $ and $": the spaced "$ x $" holds math, not words); "$2x+3$", "$5 \times 3 = 15$" and
// "$3 \text{ apples}$" are math
function isProse(body) {
  if (/(^|[^\\])\$/.test(body)) return true;
  const words = WORDS.test(body.replace(COMMANDS, " "));
  if (AMOUNT_START.test(body)) return words || body.includes("\n");
  return words && (body.includes("\n") || SPACE.test(body[0]));
}

// the longest inline formula looked for: a "$" with no closing one this close is text (and a text
// of many "$" costs the page a bounded time per "$")
const INLINE_CHARS = 1000;

// a "$" that opens an amount: a digit after it, or GSM8K's calculator note ("= $<<9*2=18>>18")
const AMOUNT = /^(\d|<<)/;

// where the inline formula opened by a "$" closes, as Pandoc reads TeX math in Markdown (with the
// spaced "$ x $" that models write): the closing "$" opens no amount; a "$" with a space after it
// is closed only by one with a space before it, and one without by one without ("$5 and $6" holds
// no formula); no "$" is escaped; a blank line ends the search. Returns ``end(i)``: the index of
// the "$" closing the one at ``i``, or -1 when that "$" is text; asked with ``i`` growing, it
// reads ``s`` once
function inlineEnds(s) {
  const ends = { tight: [], spaced: [] };
  const blanks = [];
  let slashes = 0;
  let lineStart = -1;
  let blankSoFar = false;
  for (let j = 0; j < s.length; j++) {
    const c = s[j];
    if (c === "$" && slashes % 2 === 0 && j > 0 && !AMOUNT.test(s.slice(j + 1, j + 3))) {
      ends[SPACE.test(s[j - 1]) ? "spaced" : "tight"].push(j);
    }
    if (c === "\n") {
      if (blankSoFar) blanks.push(lineStart);
      lineStart = j;
      blankSoFar = true;
    } else if (!SPACE.test(c)) {
      blankSoFar = false;
    }
    slashes = c === "\\" ? slashes + 1 : 0;
  }
  const next = { tight: 0, spaced: 0 };
  let b = 0;
  return (i) => {
    if (i + 1 >= s.length) return -1;
    const kind = SPACE.test(s[i + 1]) ? "spaced" : "tight";
    const list = ends[kind];
    while (next[kind] < list.length && list[next[kind]] <= i + 1) next[kind]++;
    while (b < blanks.length && blanks[b] < i) b++;
    const j = next[kind] < list.length ? list[next[kind]] : -1;
    if (j < 0 || j - i > INLINE_CHARS || (b < blanks.length && blanks[b] < j)) return -1;
    return isProse(s.slice(i + 1, j)) ? -1 : j;
  };
}

const DELIMITERS = [["$$", "$$", true], ["\\[", "\\]", true], ["\\(", "\\)", false]];

// the text as pieces: {text} or {math, display, raw} (raw: the formula with its delimiters)
function splitMath(s) {
  const out = [];
  const inlineEnd = inlineEnds(s);
  const unclosed = new Set(); // a delimiter with no closing one left: not looked for again
  let text = "";
  const found = (math, display, raw) => {
    if (text) out.push({ text });
    text = "";
    out.push({ math, display, raw });
  };
  let i = 0;
  scan: while (i < s.length) {
    if (s[i] === "\\" && s[i + 1] === "$") { text += "\\$"; i += 2; continue; }
    for (const [left, right, display] of DELIMITERS) {
      if (unclosed.has(left) || !s.startsWith(left, i)) continue;
      const j = s.indexOf(right, i + left.length);
      if (j < 0) unclosed.add(left);
      if (j > i + left.length) {
        found(s.slice(i + left.length, j), display, s.slice(i, j + right.length));
        i = j + right.length;
        continue scan;
      }
    }
    if (s.startsWith("$$", i)) { text += "$$"; i += 2; continue; }
    if (s[i] === "$") {
      const j = inlineEnd(i);
      if (j > 0) { found(s.slice(i + 1, j), false, s.slice(i, j + 1)); i = j + 1; continue; }
    }
    text += s[i];
    i += 1;
  }
  if (text) out.push({ text });
  return out;
}

// --- rendering ------------------------------------------------------------------------------------

// every formula starts from these macros (a fresh copy: a \gdef in one formula reaches no other).
// Colour is dropped: the policy's text may not pose in the page's own colours ("right" in green)
// nor hide in the background's
const NEUTRAL = {
  "\\color": { tokens: [], numArgs: 1 },
  "\\textcolor": "\\@secondoftwo",
  "\\colorbox": "\\@secondoftwo",
  "\\fcolorbox": { tokens: [], numArgs: 2 },
};
const KATEX = {
  throwOnError: true, // whatever KaTeX cannot render is caught below and stays text
  strict: "ignore",
  trust: false, // no \href, \url, \includegraphics, \htmlStyle: no links, images or styles
  maxExpand: 500, // a recursive macro stops here (well before the stack does)
  maxSize: 10, // em: the largest \rule, \kern or \raisebox
};

// ``source`` rendered by KaTeX in a box that clips what it paints; null when it cannot be
function mathBox(source, display, cls) {
  if (!window.katex || HIDDEN_ONE.test(source)) return null;
  const box = document.createElement(display ? "div" : "span");
  box.className = cls;
  try {
    katex.render(source, box, { ...KATEX, displayMode: display, macros: { ...NEUTRAL } });
  } catch (e) {
    return null;
  }
  return box;
}

// model text with the math in it rendered
function richText(source) {
  const out = document.createDocumentFragment();
  for (const piece of splitMath(source)) {
    if (piece.text !== undefined) { out.append(plain(piece.text)); continue; }
    out.append(mathBox(piece.math, piece.display, piece.display ? "math display" : "math") || plain(piece.raw));
  }
  return out;
}

// a cell of model text: its math rendered; all of it as text if anything fails
function textCell(node, value) {
  const source = value === null || value === undefined ? "" : String(value);
  try {
    node.append(richText(source));
  } catch (e) {
    node.replaceChildren(plain(source));
  }
  return node;
}

// an extracted or a gold answer: LaTeX without delimiters, rendered whole (else as text)
function formulaCell(node, value) {
  const source = value === null || value === undefined ? "-" : typeof value === "string" ? value : JSON.stringify(value);
  const box = mathBox(source, false, "math");
  node.append(box || plain(source));
  return node;
}
