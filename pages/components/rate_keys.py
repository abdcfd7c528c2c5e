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
"""

from __future__ import annotations

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
  const state = window.__medhelmRateKeys || (window.__medhelmRateKeys = {item: null, current: 0});
  const selector = (key) => `.st-key-${key}`;
  const form = () => document.querySelector(selector(data.form + state.item)) ||
    document.querySelector(`[class*="st-key-${data.form}"]`);
  const groups = () => Array.from(form() ? form().querySelectorAll('[role="radiogroup"]') : []);

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
  state.listener = onKey;
  document.addEventListener("keydown", onKey, true);

  if (item && item !== state.item) {
    // A new item: back to the top of the page and its first criterion, once its form is drawn.
    state.item = item;
    let tries = 0;
    const scrollers = '[data-testid="stMain"], [data-testid="stAppViewContainer"], section.main';
    const settle = () => {
      for (const el of [document.scrollingElement, ...document.querySelectorAll(scrollers)]) {
        if (el) el.scrollTop = 0;
      }
      if (document.querySelector(`${selector(data.form + item)} [role="radiogroup"]`)) { focusGroup(0); return; }
      if (tries++ < 40) setTimeout(settle, 50);
    };
    setTimeout(settle, 0);
  }
  return () => {
    if (state.listener === onKey) {
      document.removeEventListener("keydown", onKey, true);
      state.listener = null;
    }
  };
}
"""

_component = st.components.v2.component("medhelm_rate_keys", js=_JS)


def form_key(item_token: str) -> str:
    """The key of the container that holds the rating form of the item whose opaque token is ``item_token``."""
    return f"{FORM}{item_token}"


def rating_keys(item_token: str) -> None:
    """Turn the keys on for the item whose opaque token is ``item_token`` (a new token scrolls to the top and
    highlights the first criterion). Call it once per run of the Rate page, after its form."""
    _component(key="rate_keys", data={"item": item_token, "form": FORM, "submit": SUBMIT, "next": NEXT,
                                      "previous": PREVIOUS})
