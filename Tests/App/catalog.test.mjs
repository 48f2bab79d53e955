// The string catalog (Sources/Relay/Resources/app/strings.json) and its rules (catalog.js):
// English and German complete with the same placeholders; every key the page, the consent
// page and the service worker use is there, and every key there is used; the language
// follows navigator.languages (README "Try it in a browser").
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { pickLanguage, localeFor, format, placeholders, translator } from "../../Sources/Relay/Resources/app/catalog.js";

const APP = fileURLToPath(new URL("../../Sources/Relay/Resources/app/", import.meta.url));
const catalog = JSON.parse(readFileSync(APP + "strings.json", "utf8"));
const sources = Object.fromEntries(readdirSync(APP).filter((name) => /\.(js|html)$/.test(name))
  .map((name) => [name, readFileSync(APP + name, "utf8")]));
// The relay's own keys (Swift, the notification texts): kept as they are, used by the relay.
const RELAY_KEYS = ["push.title", "push.asking", "push.asking.unnamed", "push.asking.shared", "push.asking.shared.unnamed",
                    "push.checking", "push.checking.unnamed", "push.checking.shared", "push.checking.shared.unnamed",
                    "push.with_reason", "push.reminder", "push.reminder.unnamed"];
// Keys the page builds from a name (`${view}.title`, `day.${n}`, …): every member of each family.
const VIEWS = ["home", "requests", "agents", "places", "quiet", "devices", "account"];
const STATES = ["connecting", "connected", "disconnected", "expired", "replaced", "revoked", "signed_out"];
const OUTCOMES = ["shared", "shared_auto", "declined", "no_answer", "permission", "no_fix", "other_device", "expired",
                  "declined_notification"];
const PLURALS = ["stop.ends.always", "stop.ends.keys", "stop.ends.grants", "stop.done.always", "stop.done.shares",
                 "stop.done.keys", "stop.done.grants", "stop.done.requests"];
const BUILT = [...VIEWS.flatMap((view) => [`nav.${view}`, `${view}.title`]), ...STATES.map((state) => `status.${state}`),
               ...OUTCOMES.map((outcome) => `outcome.${outcome}`), ...[1, 2, 3, 4, 5, 6, 7].map((day) => `day.${day}`),
               ...["on", "off", "refused", "unavailable"].map((state) => `home.push.${state}`),
               ...["name", "approximate", "precise"].map((share) => `places.shared.${share}`),
               ...PLURALS.flatMap((key) => [`${key}.one`, `${key}.other`])];

/** Every catalog key named in the files: data-i18n="…", data-i18n-attr="attr:…", and quoted literals of a catalog namespace. */
function namedKeys() {
  const namespaces = new Set(Object.keys(catalog.en).map((key) => key.split(".")[0]));
  const keys = new Set();
  for (const [name, text] of Object.entries(sources)) {
    if (name.endsWith(".html")) {
      for (const match of text.matchAll(/data-i18n="([^"]+)"/g)) keys.add(match[1]);
      for (const match of text.matchAll(/data-i18n-attr="([^"]+)"/g)) {
        for (const pair of match[1].split(";")) keys.add(pair.split(":")[1].trim());
      }
      continue;
    }
    for (const match of text.matchAll(/["'`]([a-z]+(?:\.[a-z0-9_]+)+)["'`]/g)) {
      if (namespaces.has(match[1].split(".")[0]) && !/\.(js|json|html|css|png|webmanifest)$/.test(match[1])) keys.add(match[1]);
    }
  }
  return keys;
}

test("English and German hold the same keys, each a text with the same placeholders", () => {
  assert.deepEqual(Object.keys(catalog).sort(), ["de", "en"]);
  assert.deepEqual(Object.keys(catalog.de).sort(), Object.keys(catalog.en).sort(), "every key in both languages");
  for (const key of Object.keys(catalog.en)) {
    for (const language of ["en", "de"]) {
      assert.equal(typeof catalog[language][key], "string", `${language} ${key}`);
      assert.ok(catalog[language][key].trim(), `${language} ${key} is not empty`);
    }
    assert.deepEqual(placeholders(catalog.de[key]), placeholders(catalog.en[key]), `placeholders of ${key}`);
  }
});

test("the relay's notification keys stay", () => {
  for (const key of RELAY_KEYS) assert.ok(key in catalog.en && key in catalog.de, key);
});

test("every key the page, the consent page and the service worker name is in the catalog", () => {
  const missing = [...namedKeys(), ...BUILT].filter((key) => !(key in catalog.en) && !PLURALS.includes(key));
  assert.deepEqual(missing, []);
  assert.ok(namedKeys().has("sw.fallback") && namedKeys().has("sw.reject"), "the service worker's texts are looked up");
  assert.ok(namedKeys().has("consent.text"), "the consent page's texts are looked up");
});

test("every key in the catalog is used (by the page or, push.*, by the relay)", () => {
  const used = new Set([...namedKeys(), ...BUILT, ...RELAY_KEYS]);
  assert.deepEqual(Object.keys(catalog.en).filter((key) => !used.has(key)), []);
});

test("no page text is left in the markup: every element with words gets them from the catalog", () => {
  for (const name of ["index.html", "consent.html"]) {
    const body = sources[name].split("<body>")[1].replace(/<!--[\s\S]*?-->/g, "").replace(/<code>[\s\S]*?<\/code>/g, "")
      .replace(/<option value="\d+"[^>]*>[^<]*<\/option>/g, "");  // "250 m": numbers and units
    const words = [...body.matchAll(/>([^<]*[A-Za-z][^<]*)</g)].map((match) => match[1].trim()).filter((text) => text !== "Whereabot");
    assert.deepEqual(words, [], `${name}: text outside the catalog`);
  }
});

test("the language follows navigator.languages: German for any de*, else English", () => {
  assert.equal(pickLanguage(["de-DE"]), "de");
  assert.equal(pickLanguage(["de"]), "de");
  assert.equal(pickLanguage(["de-AT", "en-US"]), "de");
  assert.equal(pickLanguage(["DE-ch"]), "de");
  assert.equal(pickLanguage(["fr-FR", "de-CH"]), "de", "the first language the catalog holds");
  assert.equal(pickLanguage(["en-US", "de-DE"]), "en", "the person's order counts");
  assert.equal(pickLanguage(["fr-FR"]), "en");
  assert.equal(pickLanguage(["dex"]), "en", "only de and its regions");
  assert.equal(pickLanguage([]), "en");
  assert.equal(pickLanguage(undefined), "en");
  assert.equal(localeFor("de", ["fr", "de-AT"]), "de-AT", "dates as the browser writes them");
  assert.equal(localeFor("en", ["de-DE"]), "en");
});

test("placeholders are filled once, and a value's own braces stay", () => {
  assert.equal(format("{owner}'s agent {agent}", { owner: "Ada", agent: "{owner}" }), "Ada's agent {owner}");
  assert.equal(format("{seconds} s left", { seconds: 0 }), "0 s left");
  assert.equal(format("{missing} stays", {}), "{missing} stays");
  const t = translator({ en: { "a.b": "Hello {name}", "only.en": "English" }, de: { "a.b": "Hallo {name}" } }, "de");
  assert.equal(t("a.b", { name: "<b>Grace</b>" }), "Hallo <b>Grace</b>", "text, inserted with textContent");
  assert.equal(t("only.en"), "English", "a missing German text falls back to English");
  assert.equal(t("no.such.key"), "no.such.key");
  assert.equal(translator(catalog, "de")("prompt.asking", { agent: "Claude" }), "Dein Agent Claude möchte wissen, wo du bist");
});
