/* Search results: the snippet under each result is the page's text around the searched
   word (Sphinx's searchtools.js reads it from the page's HTML). The equations in that HTML
   are TeX source, which MathJax typesets only on the page itself, so the snippets showed
   "\(\tilde\alpha = \alpha(T^2+T-2)\)". Here, before Sphinx takes the text, each inline
   formula becomes a plain-text approximation (Greek letters, sub- and superscripts,
   relations: "α̃ = α(T²+T−2)") and each displayed equation "[equation]".
   Sphinx's search page defines `Search` (a global `const` of searchtools.js); on other
   pages this script does nothing. */
(function () {
  "use strict";
  const SYMBOLS = {
    alpha: "α", beta: "β", gamma: "γ", delta: "δ", epsilon: "ϵ", varepsilon: "ε", zeta: "ζ",
    eta: "η", theta: "θ", vartheta: "ϑ", iota: "ι", kappa: "κ", lambda: "λ", mu: "μ", nu: "ν",
    xi: "ξ", pi: "π", rho: "ρ", sigma: "σ", tau: "τ", upsilon: "υ", phi: "ϕ", varphi: "φ",
    chi: "χ", psi: "ψ", omega: "ω", Gamma: "Γ", Delta: "Δ", Theta: "Θ", Lambda: "Λ", Xi: "Ξ",
    Pi: "Π", Sigma: "Σ", Upsilon: "Υ", Phi: "Φ", Psi: "Ψ", Omega: "Ω",
    le: "≤", leq: "≤", ge: "≥", geq: "≥", ne: "≠", neq: "≠", approx: "≈", sim: "∼",
    simeq: "≃", equiv: "≡", propto: "∝", to: "→", rightarrow: "→", leftarrow: "←",
    mapsto: "↦", infty: "∞", times: "×", cdot: "·", pm: "±", mp: "∓", in: "∈", notin: "∉",
    subset: "⊂", cup: "∪", cap: "∩", sum: "∑", prod: "∏", int: "∫", iint: "∬",
    partial: "∂", nabla: "∇", ell: "ℓ", top: "⊤", otimes: "⊗", circ: "∘", star: "⋆",
    dots: "…", ldots: "…", cdots: "⋯", langle: "⟨", rangle: "⟩", lVert: "‖", rVert: "‖",
    Vert: "‖", lvert: "|", rvert: "|", vert: "|", mid: "|", lfloor: "⌊", rfloor: "⌋",
    sqrt: "√", forall: "∀", exists: "∃", prime: "′", emptyset: "∅",
    // the book's own macros (mathjax3_config in _config.yml)
    R: "ℝ", E: "𝔼", Tr: "Tr", mmse: "MMSE", GOE: "GOE", softmax: "softmax",
  };
  const ACCENTS = { tilde: "\u0303", hat: "\u0302", widehat: "\u0302", bar: "\u0304",
    overline: "\u0305", dot: "\u0307", ddot: "\u0308", vec: "\u20d7" };
  const SUP = { 0: "⁰", 1: "¹", 2: "²", 3: "³", 4: "⁴", 5: "⁵", 6: "⁶", 7: "⁷", 8: "⁸",
    9: "⁹", "+": "⁺", "-": "⁻", "−": "⁻", n: "ⁿ", i: "ⁱ", T: "ᵀ", "⊤": "ᵀ", k: "ᵏ", t: "ᵗ" };
  const SUB = { 0: "₀", 1: "₁", 2: "₂", 3: "₃", 4: "₄", 5: "₅", 6: "₆", 7: "₇", 8: "₈",
    9: "₉", "+": "₊", "-": "₋", "−": "₋", a: "ₐ", e: "ₑ", i: "ᵢ", j: "ⱼ", k: "ₖ", l: "ₗ",
    n: "ₙ", t: "ₜ", "ρ": "ᵨ" };

  // "{...}" or one token at the start of s: [content, rest]
  function group(s) {
    s = s.replace(/^\s+/, "");
    if (s[0] === "{") {
      let depth = 0;
      for (let i = 0; i < s.length; i++) {
        if (s[i] === "{") depth++;
        else if (s[i] === "}" && --depth === 0) return [s.slice(1, i), s.slice(i + 1)];
      }
      return [s.slice(1), ""];
    }
    const m = s.match(/^(\\[A-Za-z]+|\\.|.)/u);
    return m ? [m[0], s.slice(m[0].length)] : ["", ""];
  }

  function script(text, table, mark) {
    const chars = [...text];
    return chars.every((c) => c in table) ? chars.map((c) => table[c]).join("")
      : mark + (chars.length > 1 ? "(" + text + ")" : text);
  }

  function texToText(tex) {
    let out = "";
    let s = tex;
    while (s.length) {
      const c = s[0];
      if (c === "\\") {
        const m = s.match(/^\\([A-Za-z]+|.)/);
        const name = m[1];
        s = s.slice(m[0].length);
        if (name in ACCENTS) {
          const [arg, rest] = group(s);
          s = rest;
          const inner = texToText(arg);
          out += [...inner].length === 1 ? inner + ACCENTS[name] : inner;
        } else if (name === "frac" || name === "tfrac" || name === "dfrac") {
          const [num, r1] = group(s);
          const [den, r2] = group(r1);
          s = r2;
          const a = texToText(num), b = texToText(den);
          out += (a.length > 1 ? "(" + a + ")" : a) + "/" + (b.length > 1 ? "(" + b + ")" : b);
        } else if (name === "sqrt") {
          const [arg, rest] = group(s);
          s = rest;
          const a = texToText(arg);
          out += "√" + ([...a].length > 1 ? "(" + a + ")" : a);
        } else if (/^(left|right|big|Big|bigg|Bigg|bigl|bigr|Bigl|Bigr|displaystyle|textstyle|limits|nolimits)$/.test(name)) {
          // sizes only
        } else if (/^(mathrm|mathbb|mathcal|mathbf|mathsf|mathit|boldsymbol|operatorname|text|textrm|mbox|rm|bf|it|cal)$/.test(name)) {
          // the font goes, the letters stay
        } else if (/^(,|;|:|!| |quad|qquad)$/.test(name)) {
          out += name === "!" ? "" : " ";
        } else if (name in SYMBOLS) {
          out += SYMBOLS[name];
        } else if (name.length === 1) {
          out += name;  // \{ \} \| \_ ...
        } else {
          out += name;
        }
      } else if (c === "^" || c === "_") {
        const [arg, rest] = group(s.slice(1));
        s = rest;
        out += script(texToText(arg), c === "^" ? SUP : SUB, c);
      } else if (c === "{" || c === "}" || c === "&") {
        s = s.slice(1);
      } else if (c === "-") {
        out += "−";
        s = s.slice(1);
      } else if (c === "~") {
        out += " ";
        s = s.slice(1);
      } else {
        out += c;
        s = s.slice(1);
      }
    }
    return out.replace(/\s+/g, " ").trim();
  }

  function plainMath(doc) {
    doc.querySelectorAll("div.math").forEach((el) => {
      el.replaceWith(doc.createTextNode(" [equation] "));
    });
    doc.querySelectorAll("span.math").forEach((el) => {
      const tex = el.textContent.trim().replace(/^\\\(|\\\)$/g, "").replace(/^\$|\$$/g, "");
      el.replaceWith(doc.createTextNode(texToText(tex)));
    });
  }

  window.aimTexToText = texToText;  // for the browser test
  document.addEventListener("DOMContentLoaded", () => {
    if (typeof Search === "undefined" || typeof Search.htmlToText !== "function") return;
    const htmlToText = Search.htmlToText;
    Search.htmlToText = (htmlString, anchor) => {
      const doc = new DOMParser().parseFromString(htmlString, "text/html");
      plainMath(doc);
      return htmlToText(doc.documentElement.outerHTML, anchor);
    };
  });
})();
