"""Places in the browser phone (docs/protocol.md "Places"), in Debian's real Chromium driven by
Playwright, against a real `whereabot serve`; the agent is curl. A place made from the
browser's position and set to "name only": an Allow from inside it answers the agent with
the place's name and no position; from outside, the fix as usual. The place lives in the
browser's storage only."""
import json

from playwright.sync_api import expect

from push_kit import Locate
from test_browser_phone import LAT, LON, Person, browser, push, relay, show_view, signed_in  # noqa: F401 (fixtures)


def test_a_place_shares_its_name_only_from_inside_and_the_fix_from_outside(browser, admin, make_user, relay):
    person = Person(admin, make_user, relay)
    context, page = signed_in(browser, person)
    try:
        show_view(page, "places")
        expect(page.locator("#places-empty")).to_be_visible()
        page.fill("#place-name", " \u202eHome ")
        page.click("#place-here")
        expect(page.locator("#place-latitude")).to_have_value(f"{LAT:.6f}", timeout=15000)
        page.click("#place-form button[type=submit]")
        expect(page.locator("#places li")).to_have_count(1)
        expect(page.locator("#places li span")).to_have_text("Home — within 250 m, shared name only")
        stored = json.loads(page.evaluate("localStorage.getItem('whereabot.places')"))
        assert stored == [{"name": "Home", "latitude": round(LAT, 6), "longitude": round(LON, 6), "radius_m": 250,
                           "share": "name"}], "cleaned, and kept in this browser"

        call = Locate(relay.base, person.agent, 20).begin()
        expect(page.locator("#prompt")).to_be_visible(timeout=10000)
        page.click("#allow")
        call.join()
        assert call.status == 200, call.body
        answer = json.loads(call.body)
        assert (answer["place"], answer["precision"]) == ("Home", "place")
        assert "latitude" not in answer and "longitude" not in answer
        expect(page.locator("#history li").first).to_contain_text("(the place's name only)")

        context.set_geolocation({"latitude": LAT + 0.01, "longitude": LON})  # about 1.1 km north: outside
        call = Locate(relay.base, person.agent, 20).begin()
        expect(page.locator("#prompt")).to_be_visible(timeout=10000)
        page.click("#allow")
        call.join()
        answer = json.loads(call.body)
        assert call.status == 200 and answer["precision"] == "precise" and abs(answer["latitude"] - (LAT + 0.01)) < 1e-6

        page.click("#places li button")
        expect(page.locator("#places-empty")).to_be_visible()
        assert page.evaluate("localStorage.getItem('whereabot.places')") == "[]"

        # At most 50 places: the 51st is refused with a sentence and nothing is stored.
        page.evaluate("localStorage.setItem('whereabot.places', JSON.stringify(Array.from({length: 50}, (_, i) =>"
                      " ({name: 'P' + i, latitude: 10, longitude: 10, radius_m: 100, share: 'name'}))))")
        page.fill("#place-name", "One too many")
        page.click("#place-form button[type=submit]")
        expect(page.locator("#place-error")).to_have_text("This phone keeps at most 50 places: remove one first.")
        assert page.evaluate("JSON.parse(localStorage.getItem('whereabot.places')).length") == 50
    finally:
        context.close()
