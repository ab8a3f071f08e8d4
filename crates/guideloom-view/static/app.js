// guideloom viewer: progressive enhancement only (every page works without it). Served as
// /static/app.js; the CSP allows scripts from 'self' only, so nothing here is inline.
"use strict";

// CSP violations are recorded on <body data-csp-violations="N"> (the browser test reads it).
let violations = 0;
document.addEventListener("securitypolicyviolation", () => {
  violations += 1;
  document.body.dataset.cspViolations = String(violations);
});

document.addEventListener("DOMContentLoaded", () => {
  document.body.dataset.cspViolations = String(violations);
  // Switching snapshot or annotation set submits the form at once.
  for (const id of ["snapshot-select", "set-select"]) {
    const select = document.getElementById(id);
    if (select) {
      select.addEventListener("change", () => select.form.submit());
    }
  }
  // Filter the page's rows by text (records and annotation values alike).
  const filter = document.getElementById("filter");
  const count = document.getElementById("filter-count");
  if (filter) {
    filter.addEventListener("input", () => {
      const needle = filter.value.toLowerCase();
      let shown = 0;
      const rows = document.querySelectorAll("#records tbody tr");
      for (const row of rows) {
        const hit = needle === "" || row.textContent.toLowerCase().includes(needle);
        row.classList.toggle("hidden", !hit);
        if (hit) shown += 1;
      }
      if (count) count.textContent = needle === "" ? "" : `${shown} of ${rows.length} rows`;
    });
  }
  const hit = document.querySelector("tr.hit");
  if (hit) hit.scrollIntoView({ block: "center" });
});
