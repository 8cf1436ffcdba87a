"use strict";
// The contract admin's clause form shows only the selected kind's parameters
// (contracts/admin_clauses.py): every kind's inputs are on the page, grouped by kind.
(function () {
  function sync(select) {
    const clause = select.closest(".inline-related");
    if (!clause) {
      return;
    }
    clause.querySelectorAll("fieldset.clause-params").forEach(function (group) {
      const shown = group.classList.contains("clause-params-" + select.value);
      group.style.display = shown ? "" : "none";
    });
  }
  function syncAll() {
    document.querySelectorAll("select.clause-kind").forEach(sync);
  }
  document.addEventListener("change", function (event) {
    if (event.target.matches("select.clause-kind")) {
      sync(event.target);
    }
  });
  document.addEventListener("DOMContentLoaded", syncAll);
  document.addEventListener("formset:added", syncAll);
})();
