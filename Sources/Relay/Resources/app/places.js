// Places (README "Living with it": places): defined and matched on this phone only. A place is a
// name (at most 40 characters), a centre (the current position or typed) and a radius of 100 m to 5
// km, kept in this browser's storage and never sent anywhere: no name, centre or radius reaches the
// relay. Only when the person shares while inside a place set to "name only" does the answer carry
// the place's name — and then no position at all.
import { approximate, locateOnce } from "./position.js";
import { t } from "./i18n.js";

const $ = (id) => document.getElementById(id);
const KEY = "whereabot.places";
/** The longest name, as the relay accepts it. */
export const MAX_NAME = 40;
/** Radii a place may have, in metres. */
export const MIN_RADIUS_M = 100;
export const MAX_RADIUS_M = 5000;
/** Places one phone keeps (matching walks them all at every answer). */
export const MAX_PLACES = 50;
const SHARES = ["name", "approximate", "precise"];

/** Controls and invisible format characters removed, trimmed, cut (as the relay cleans names). */
export function cleanName(text) {
  return String(text).replace(/[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/gu, "").trim().slice(0, MAX_NAME);
}

export function loadPlaces() {
  try {
    const list = JSON.parse(localStorage.getItem(KEY) || "[]");
    return Array.isArray(list) ? list.filter(valid).slice(0, MAX_PLACES) : [];
  } catch {
    return [];
  }
}

function valid(place) {
  return place && typeof place.name === "string" && place.name.length >= 1 && place.name.length <= MAX_NAME
    && Number.isFinite(place.latitude) && Math.abs(place.latitude) <= 90
    && Number.isFinite(place.longitude) && Math.abs(place.longitude) <= 180
    && Number.isFinite(place.radius_m) && place.radius_m >= MIN_RADIUS_M && place.radius_m <= MAX_RADIUS_M
    && SHARES.includes(place.share);
}

function save(list) {
  localStorage.setItem(KEY, JSON.stringify(list));
  renderPlaces();
}

/** Metres between two points (haversine). */
export function distanceM(a, b) {
  const rad = (degrees) => degrees * Math.PI / 180;
  const dLat = rad(b.latitude - a.latitude), dLon = rad(b.longitude - a.longitude);
  const h = Math.sin(dLat / 2) ** 2 + Math.cos(rad(a.latitude)) * Math.cos(rad(b.latitude)) * Math.sin(dLon / 2) ** 2;
  return 2 * 6371008.8 * Math.asin(Math.min(1, Math.sqrt(h)));
}

/** The place holding `fix` (the smallest, when several do), or null. */
export function placeAt(fix) {
  const holding = loadPlaces().filter((place) => distanceM(place, fix) <= place.radius_m);
  return holding.sort((a, b) => a.radius_m - b.radius_m)[0] || null;
}

/**
 * The answer to send for `fix` and how it was shared: inside a "name only" place its name
 * alone; inside an "approximately" place (or when the person chose so) the grid cell's
 * centre; else the fix.
 */
export function answerFor(id, fix, approximately) {
  const place = placeAt(fix);
  if (place && place.share === "name") {
    return { message: { type: "location", id, precision: "place", place: place.name, timestamp_ms: fix.timestamp_ms },
             precision: "place" };
  }
  if (approximately || (place && place.share === "approximate")) {
    return { message: { type: "location", id, ...approximate(fix) }, precision: "approximate" };
  }
  return { message: { type: "location", id, ...fix }, precision: "precise" };
}

export function renderPlaces() {
  const places = loadPlaces();
  $("places").replaceChildren(...places.map((place, index) => {
    const li = document.createElement("li");
    const text = document.createElement("span");
    text.textContent = t("places.row", { name: place.name, radius: place.radius_m, share: t(`places.shared.${place.share}`) });
    const remove = document.createElement("button");
    remove.type = "button";
    remove.textContent = t("common.remove");
    remove.onclick = () => save(loadPlaces().filter((_, other) => other !== index));
    li.append(text, remove);
    return li;
  }));
  $("places-empty").hidden = places.length > 0;
}

/** Wires the form that adds a place. */
export function bindPlaces() {
  $("place-here").onclick = async () => {
    $("place-error").hidden = true;
    const result = await locateOnce(Date.now() + 11000);
    if (!result.fix) {
      $("place-error").textContent = t("places.no_position");
      $("place-error").hidden = false;
      return;
    }
    $("place-latitude").value = result.fix.latitude.toFixed(6);
    $("place-longitude").value = result.fix.longitude.toFixed(6);
  };
  $("place-form").onsubmit = (event) => {
    event.preventDefault();
    const place = { name: cleanName($("place-name").value), latitude: Number($("place-latitude").value),
                    longitude: Number($("place-longitude").value), radius_m: Number($("place-radius").value),
                    share: $("place-share").value };
    if (loadPlaces().length >= MAX_PLACES) {
      $("place-error").textContent = t("places.too_many", { count: MAX_PLACES });
      $("place-error").hidden = false;
      return;
    }
    if (!valid(place)) {
      $("place-error").textContent = t("places.invalid", { length: MAX_NAME, min: MIN_RADIUS_M, max: MAX_RADIUS_M });
      $("place-error").hidden = false;
      return;
    }
    $("place-error").hidden = true;
    save([...loadPlaces(), place]);
    $("place-name").value = "";
  };
  renderPlaces();
}

/** Forgets this phone's places (another account signs in here). */
export function forgetPlaces() {
  localStorage.removeItem(KEY);
}
