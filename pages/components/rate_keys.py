"""The Rate page's keyboard: 1-9 score the highlighted criterion, Enter submits, J and K go to the next and the
previous item, and a new item starts at the top of the page with its first criterion highlighted.

Streamlit has no hotkeys of its own. The well-kept way, which the streamlit-shortcuts package takes too, is a
small script in the page that listens for keys and clicks the page's own buttons and radios, so a key does
exactly what the click would (the same form, the same callbacks, the same session check). The script is an
``st.components.v2`` component: it runs in the app's own page from the app's own server (no iframe, nothing
fetched from elsewhere), and it is this module's constant text; no data reaches it except the opaque token of
the item on screen. It finds the page's controls by the ``st-key-<key>`` classes Streamlit gives keyed elements:
the form's container (:func:`form_key`), :data:`SUBMIT`, :data:`NEXT` and :data:`PREVIOUS`.

Keys typed into a text field (the comment, a note) are left to the field, except Enter in the comment, which
submits; Escape leaves a field, and Ctrl+Enter submits from anywhere.

A press acts on the item on screen, never on the one on its way out. Once Submit, Next or Previous is pressed
(by key or click), the item's form gives up the focus and the keys and those buttons wait until the page has
answered: the next item arrives (its first criterion then takes the focus), or the same item comes back (a
refused submission, its message beside it). Streamlit keeps showing the old form until the new one is drawn,
so without this a quick "4" after Enter scored the old item and a second Enter (or a double click) submitted
the new item's empty form. Each run of the page gives :func:`rating_keys` a new opaque ``run`` token, so the
script knows that the page has answered even when the item stays the same. A new item takes the focus only
from nothing, from a rating form or from what was just clicked to get there (a button, a link): a study
picker, a popover or a field the clinician is using keeps it.
"""

from __future__ import annotations

import uuid

import streamlit as st

#: the keys the script looks for (each is also the ``key`` of the element on the page); the form's container is
#: ``FORM`` followed by the item's token (:func:`form_key`)
FORM, SUBMIT, NEXT, PREVIOUS = "rate_form_", "rate_submit", "rate_next", "rate_previous"

#: what the keys do, for the page's instructions (key, action)
KEYS = (
    ("1 to 5", "score the highlighted criterion; the next criterion is highlighted"),
    ("Tab / Shift+Tab", "move between criteria and fields; arrow keys change a score"),
    ("Enter", "submit the rating (in the comment field too)"),
    ("J / K", "next / previous item"),
    ("Esc", "leave the comment field, so the keys above work again"),
)

_JS = """
export default function (component) {
  const data = component.data || {};
  const item = data.item || "";
  const state = window.__medhelmRateKeys ||
    (window.__medhelmRateKeys = {item: null, current: 0, run: null, leaving: false});
  const selector = (key) => `.st-key-${key}`;
  const anyForm = `[class*="st-key-${data.form}"]`;
  const form = () => document.querySelector(selector(data.form + state.item)) || document.querySelector(anyForm);
  const groups = () => Array.from(form() ? form().querySelectorAll('[role="radiogroup"]') : []);
  const actions = [data.submit, data.next, data.previous].map((key) => `${selector(key)} button`).join(", ");

  function focusGroup(index) {
    const all = groups();
    if (!all.length) return false;
    state.current = Math.max(0, Math.min(index, all.length - 1));
    const group = all[state.current];
    const input = group.querySelector("input:checked") || group.querySelector("input");
    if (input) input.focus({preventScroll: true});
    group.scrollIntoView({block: "nearest"});
    return true;
  }
  function press(key) {
    const button = document.querySelector(`${selector(key)} button`);
    if (button && !button.disabled) { button.click(); return true; }
    return false;
  }
  function typing(el) {
    if (!el || !el.tagName) return false;
    if (el.tagName === "TEXTAREA" || el.isContentEditable) return true;
    return el.tagName === "INPUT" && !["radio", "checkbox", "button", "submit"].includes(el.type);
  }
  function inOverlay(el) {
    return el.closest && el.closest('[role="dialog"], [role="listbox"], [data-baseweb="popover"]');
  }
  function inUse(el) {
    // A control outside the rating forms that the clinician is using: an open picker or popover, a text field.
    if (!el || !el.tagName || el === document.body || (el.closest && el.closest(anyForm))) return false;
    if (inOverlay(el) || el.getAttribute("aria-expanded") === "true") return true;
    return typing(el) && el.getAttribute("role") !== "combobox";
  }
  function onClick(event) {
    // In the capture phase, before Streamlit's own handler: a second press while the first is answered is dropped.
    const button = event.target && event.target.closest && event.target.closest(actions);
    if (!button) return;
    if (state.leaving) { event.preventDefault(); event.stopPropagation(); return; }
    state.leaving = true;
    const active = document.activeElement;
    if (active && active.closest && active.closest(anyForm)) active.blur();  // the old form loses its highlight
  }
  function onKey(event) {
    if (!form() || event.isComposing) return;
    const handled = () => { event.preventDefault(); event.stopPropagation(); };
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      if (press(data.submit)) handled();
      return;
    }
    if (event.altKey || event.ctrlKey || event.metaKey) return;
    if (typing(event.target)) {
      const target = event.target;
      if (event.key === "Escape") target.blur();
      if (event.key === "Enter" && target.tagName === "INPUT" && target.getAttribute("role") !== "combobox" &&
          form() && form().contains(target)) {
        // Enter in the comment submits, once the field has handed its text to the form (on blur).
        handled();
        target.blur();
        setTimeout(() => press(data.submit), 60);
      }
      return;
    }
    if (inOverlay(event.target)) return;
    if (state.leaving) {
      // Submitted or moved on: until the page answers, these keys would land on the form on its way out.
      if (/^[1-9]$/.test(event.key) || ["Enter", "j", "J", "k", "K"].includes(event.key)) handled();
      return;
    }
    const all = groups();
    const inside = all.findIndex((group) => group.contains(document.activeElement));
    if (inside >= 0) state.current = inside;
    if (/^[1-9]$/.test(event.key)) {
      const group = all[state.current];
      if (!group) return;
      const option = Array.from(group.querySelectorAll("label")).find((l) => l.innerText.trim() === event.key);
      if (!option) return;
      handled();
      option.click();
      if (state.current + 1 < all.length) focusGroup(state.current + 1);
      else (option.querySelector("input") || option).focus({preventScroll: true});
    } else if (event.key === "Enter") {
      if (press(data.submit)) handled();
    } else if (event.key === "j" || event.key === "J") {
      if (press(data.next)) handled();
    } else if (event.key === "k" || event.key === "K") {
      if (press(data.previous)) handled();
    }
  }

  // In the capture phase: the radios' own handlers (react-aria) would otherwise take Enter first.
  if (state.listener) document.removeEventListener("keydown", state.listener, true);
  if (state.clicks) document.removeEventListener("click", state.clicks, true);
  state.listener = onKey;
  state.clicks = onClick;
  document.addEventListener("keydown", onKey, true);
  document.addEventListener("click", onClick, true);

  // This run of the page has drawn its form: a press made before it has been answered.
  const answered = data.run !== state.run;
  const wasLeaving = state.leaving;
  state.run = data.run;
  if (answered) state.leaving = false;
  if (item && item !== state.item) {
    // A new item: back to the top of the page and its first criterion, once its form is drawn.
    state.item = item;
    let tries = 0;
    const scrollers = '[data-testid="stMain"], [data-testid="stAppViewContainer"], section.main';
    const settle = () => {
      if (item !== state.item) return;
      for (const el of [document.scrollingElement, ...document.querySelectorAll(scrollers)]) {
        if (el) el.scrollTop = 0;
      }
      // Every criterion drawn: Streamlit loads each widget on its own, the first may come last on a first visit.
      const drawn = document.querySelectorAll(`${selector(data.form + item)} [role="radiogroup"]`).length;
      if (drawn >= (data.criteria || 1) || (drawn && tries >= 100)) {
        if (!inUse(document.activeElement)) focusGroup(0);
        return;
      }
      if (tries++ < 100) setTimeout(settle, 50);
    };
    setTimeout(settle, 0);
  } else if (answered && wasLeaving && !inUse(document.activeElement)) {
    focusGroup(state.current);  // the same item is back (a refused submission): where the clinician was
  }
  return () => {
    if (state.listener === onKey) {
      document.removeEventListener("keydown", onKey, true);
      state.listener = null;
    }
    if (state.clicks === onClick) {
      document.removeEventListener("click", onClick, true);
      state.clicks = null;
    }
  };
}
"""

_component = st.components.v2.component("medhelm_rate_keys", js=_JS)


def form_key(item_token: str) -> str:
    """The key of the container that holds the rating form of the item whose opaque token is ``item_token``."""
    return f"{FORM}{item_token}"


def rating_keys(item_token: str, criteria: int) -> None:
    """Turn the keys on for the item whose opaque token is ``item_token`` and whose form has ``criteria`` radios
    (a new token scrolls to the top and highlights the first criterion, once all are drawn). Call it once per
    run of the Rate page, at its end, after the submission has been handled: a run that moves on to another item
    must not reach it (it reruns first), so the script sees the old item's run answered only by the next item,
    or by the same item when it is refused."""
    _component(key="rate_keys", data={"item": item_token, "criteria": criteria, "run": uuid.uuid4().hex[:12],
                                      "form": FORM, "submit": SUBMIT, "next": NEXT, "previous": PREVIOUS})
