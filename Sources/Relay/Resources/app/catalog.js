// The string catalog's rules (strings.json, README "Try it in a browser"): one catalog for
// the page, the consent page and the service worker, {"en": {key: text}, "de": {key: text}}
// with {placeholders}. No DOM here, so Tests/App checks it with Node.

/** The languages the catalog holds; the first is the fallback. */
export const LANGUAGES = ["en", "de"];

/**
 * The page's language for the browser's preference list (navigator.languages): the first
 * entry the catalog holds, German for any de*, English for any en*; English otherwise.
 */
export function pickLanguage(preferences) {
  for (const tag of Array.isArray(preferences) ? preferences : []) {
    const primary = String(tag).toLowerCase().split(/[-_]/)[0];
    if (LANGUAGES.includes(primary)) return primary;
  }
  return LANGUAGES[0];
}

/** The locale for dates and numbers: the browser's own tag of `language` (en-GB, de-AT), else `language`. */
export function localeFor(language, preferences) {
  const own = (Array.isArray(preferences) ? preferences : []).find((tag) => String(tag).toLowerCase().split(/[-_]/)[0] === language);
  return own ? String(own) : language;
}

/** `text` with each {name} replaced by params[name] (one pass: a value's own braces stay as they are). */
export function format(text, params = {}) {
  return String(text).replace(/\{([a-z_]+)\}/g, (whole, name) => (name in params ? String(params[name]) : whole));
}

/** The placeholder names of `text`, sorted. */
export function placeholders(text) {
  return [...String(text).matchAll(/\{([a-z_]+)\}/g)].map((match) => match[1]).sort();
}

/** t(key, params): the text of `key` in `language` (English when missing there; the key itself when missing everywhere). */
export function translator(catalog, language) {
  const table = (catalog && catalog[language]) || {};
  const fallback = (catalog && catalog[LANGUAGES[0]]) || {};
  return (key, params) => format(table[key] ?? fallback[key] ?? key, params);
}
