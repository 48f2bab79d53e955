// One location read (APP.md §A.4): watchPosition with high accuracy, keep the most accurate
// position, stop at ≤ 30 m, after 10 s, or 500 ms before the request's deadline.

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
