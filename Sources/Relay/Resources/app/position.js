// One location read (docs/protocol.md "Answering"): watchPosition with high accuracy, keep the most
// accurate position, stop at ≤ 30 m, after 10 s, or 500 ms before the request's deadline.

export function locateOnce(expiresMs) {
  return new Promise((resolve) => {
    if (!navigator.geolocation) return resolve({ reason: "no_fix" });
    let best = null;
    let done = false;
    let watch = null;
    const finish = (result) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      if (watch !== null) navigator.geolocation.clearWatch(watch);
      resolve(result);
    };
    const fix = () => {
      const c = best.coords;
      const result = { latitude: c.latitude, longitude: c.longitude, accuracy_m: c.accuracy, timestamp_ms: Math.round(best.timestamp) };
      if (c.altitude !== null) result.altitude_m = c.altitude;
      if (c.speed !== null && !Number.isNaN(c.speed)) result.speed_mps = c.speed;
      if (c.heading !== null && !Number.isNaN(c.heading)) result.heading_deg = c.heading;
      return { fix: result };
    };
    const wait = Math.max(0, Math.min(10000, expiresMs - 500 - Date.now()));
    const timer = setTimeout(() => finish(best ? fix() : { reason: "no_fix" }), wait);
    watch = navigator.geolocation.watchPosition(
      (position) => {
        if (!best || position.coords.accuracy < best.coords.accuracy) best = position;
        if (best.coords.accuracy <= 30) finish(fix());
      },
      (error) => {
        if (error.code === error.PERMISSION_DENIED) finish({ reason: "permission" });
        else if (error.code === error.TIMEOUT || error.code === error.POSITION_UNAVAILABLE) { if (!best) return; finish(fix()); }
        else finish(best ? fix() : { reason: "error" });
      },
      { enableHighAccuracy: true, maximumAge: 0 },
    );
  });
}

/** The grid cell of "Share approximate" (README "Try it in a browser"): 0.025° on a side, about 2.8 km north-south. */
export const CELL_DEG = 0.025;
/** The least accuracy an approximate answer claims, in metres. */
export const APPROXIMATE_ACCURACY_M = 3000;

/**
 * The fix as "Share approximate" sends it: the centre of the grid cell that holds it, an
 * accuracy of at least 3 km, and nothing finer (no altitude, speed or heading).
 */
export function approximate(fix) {
  const centre = (value, limit) => {
    const cells = Math.floor(value / CELL_DEG);
    const cellsPerSide = Math.round(limit / CELL_DEG);
    const index = Math.min(Math.max(cells, -cellsPerSide), cellsPerSide - 1);  // 90° and 180° stay in the last cell
    return Number(((index + 0.5) * CELL_DEG).toFixed(4));
  };
  return { latitude: centre(fix.latitude, 90), longitude: centre(fix.longitude, 180),
           accuracy_m: Math.max(APPROXIMATE_ACCURACY_M, Math.ceil(fix.accuracy_m)), timestamp_ms: fix.timestamp_ms,
           precision: "approximate" };
}
