// A small JavaScript highlighter for the programs the scripted model writes. It returns DOM
// nodes built with textContent only, so nothing in a program can become markup.
"use strict";
(function () {
  const KEYWORDS = new Set([
    "await", "async", "break", "case", "catch", "class", "const", "continue", "default", "delete",
    "do", "else", "export", "extends", "finally", "for", "function", "if", "import", "in",
    "instanceof", "let", "new", "of", "return", "switch", "throw", "try", "typeof", "var", "void",
    "while", "yield",
  ]);
  const LITERALS = new Set(["true", "false", "null", "undefined", "this", "NaN", "Infinity"]);
  const BUILTINS = new Set(["tools", "text", "image", "console", "JSON", "Math", "Promise", "Object", "Array"]);

  // [class, regex] tried in order at each position; the first match wins.
  const RULES = [
    ["comment", /\/\/[^\n]*|\/\*[\s\S]*?(?:\*\/|$)/y],
    ["string", /`(?:\\[\s\S]|[^\\`])*`?|"(?:\\.|[^\\"\n])*"?|'(?:\\.|[^\\'\n])*'?/y],
    ["number", /\b(?:0[xX][\da-fA-F_]+|\d[\d_]*(?:\.\d+)?(?:[eE][+-]?\d+)?n?)\b/y],
    ["word", /[A-Za-z_$][\w$]*/y],
    ["space", /\s+/y],
    ["punct", /[\s\S]/y],
  ];

  function tokens(code) {
    const out = [];
    let at = 0;
    let previous = "";
    while (at < code.length) {
      for (const [kind, rule] of RULES) {
        rule.lastIndex = at;
        const m = rule.exec(code);
        if (!m || m[0].length === 0) continue;
        let cls = kind;
        const word = m[0];
        if (kind === "word") {
          if (KEYWORDS.has(word)) cls = "keyword";
          else if (LITERALS.has(word)) cls = "literal";
          else if (previous === "tools.") cls = "tool";
          else if (BUILTINS.has(word)) cls = "builtin";
          else cls = "ident";
        }
        out.push([cls, word]);
        if (kind !== "space") previous = kind === "word" && word === "tools" ? "tools" : previous === "tools" && word === "." ? "tools." : word;
        at += word.length;
        break;
      }
    }
    return out;
  }

  // A <code> element with one line per row (line numbers come from CSS counters).
  function highlight(code) {
    const block = document.createElement("code");
    block.className = "js";
    let line = document.createElement("span");
    line.className = "line";
    block.appendChild(line);
    for (const [cls, value] of tokens(String(code))) {
      const pieces = value.split("\n");
      pieces.forEach((piece, i) => {
        if (i > 0) {
          line = document.createElement("span");
          line.className = "line";
          block.appendChild(line);
        }
        if (!piece) return;
        if (cls === "space" || cls === "punct" || cls === "ident") {
          line.appendChild(document.createTextNode(piece));
        } else {
          const span = document.createElement("span");
          span.className = "tok-" + cls;
          span.textContent = piece;
          line.appendChild(span);
        }
      });
    }
    if (line.childNodes.length === 0 && block.childNodes.length > 1) block.removeChild(line);
    return block;
  }

  window.ptcHighlight = { highlight, tokens };
})();
