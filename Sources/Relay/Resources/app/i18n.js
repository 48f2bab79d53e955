// The page's language (README "Try it in a browser"): strings.json read once, the language
// chosen from navigator.languages (catalog.js), <html lang> set, and every element marked
// data-i18n="key" (its text) or data-i18n-attr="attribute:key;…" filled from the catalog.
// Imported by every module that shows text, so the catalog is there before any of them runs.
import { pickLanguage, localeFor, translator } from "./catalog.js";

const preferences = navigator.languages && navigator.languages.length ? [...navigator.languages] : [navigator.language];
const catalog = await fetch("/app/strings.json").then((response) => response.json()).catch(() => ({}));

/** "en" or "de". */
export const language = pickLanguage(preferences);
/** The locale dates and times are written in. */
export const locale = localeFor(language, preferences);
/** t("key", {name: value}): the catalog's text in the page's language. */
export const t = translator(catalog, language);

/** Fills `root`'s marked elements and sets the document's language. */
export function localize(root = document) {
  document.documentElement.lang = language;
  for (const element of root.querySelectorAll("[data-i18n]")) element.textContent = t(element.dataset.i18n);
  for (const element of root.querySelectorAll("[data-i18n-attr]")) {
    for (const pair of element.dataset.i18nAttr.split(";")) {
      const [attribute, key] = pair.split(":");
      element.setAttribute(attribute.trim(), t(key.trim()));
    }
  }
}

/** A date and time (`options` as for toLocaleString; by default the day and the minute) in the page's locale. */
export function dateTime(ms, options = { dateStyle: "medium", timeStyle: "short" }) {
  return new Date(ms).toLocaleString(locale, options);
}

/** A time of day, hours and minutes. */
export function clock(ms) {
  return new Date(ms).toLocaleTimeString(locale, { hour: "2-digit", minute: "2-digit" });
}
