// MathJax 3 configuration for pymdownx.arithmatex (generic mode): typeset only the
// elements arithmatex marks with class "arithmatex", using its \( \) and \[ \] delimiters.
// Loaded before javascripts/mathjax/tex-svg-full.js (see mkdocs.yml).
window.MathJax = {
  tex: {
    inlineMath: [["\\(", "\\)"]],
    displayMath: [["\\[", "\\]"]],
    processEscapes: true,
    processEnvironments: true,
  },
  svg: { fontCache: "global" },
  options: {
    ignoreHtmlClass: ".*|",
    processHtmlClass: "arithmatex",
  },
};

// Material's instant navigation (if it is ever enabled) swaps pages without a reload:
// typeset each new page. The first page is typeset by MathJax's own startup.
if (typeof document$ !== "undefined") {
  let first = true;
  document$.subscribe(() => {
    if (first) {
      first = false;
      return;
    }
    if (window.MathJax && window.MathJax.typesetPromise) {
      window.MathJax.typesetClear();
      window.MathJax.texReset();
      window.MathJax.typesetPromise();
    }
  });
}
