import HTTPServer
import Testing

/// The request parser and frame decoder without sockets.
@Suite struct ParserTests {
    func events(_ raw: String, limits: HTTPServerLimits = HTTPServerLimits()) -> [String] {
        var parser = HTTPRequestParser(limits: limits)
        parser.append(Array(raw.utf8))
        var out: [String] = []
        while let event = parser.next() {
            switch event {
            case .request(let request): out.append("\(request.method) \(request.target) \(request.body.count)")
            case .expectContinue: out.append("100")
            case .failure(let status): out.append("fail \(status)")
            }
        }
        return out
    }

    /// A request split at every byte boundary parses the same as in one piece.
    @Test func byteAtATimeParsesTheSame() {
        let raw = Array("POST /a?b=c HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nxyzGET / HTTP/1.1\r\nHost: y\r\n\r\n".utf8)
        var parser = HTTPRequestParser()
        var out: [String] = []
        for byte in raw {
            parser.append([byte])
            while case .request(let request)? = parser.next() { out.append("\(request.method) \(request.target)") }
        }
        #expect(out == ["POST /a?b=c", "GET /"])
    }

    @Test func queryItemsAreDecoded() {
        var parser = HTTPRequestParser()
        parser.append(Array("GET /v1/locate?timeout_secs=5&person=Ada%20L&flag&plus=a+b HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
        guard case .request(let request)? = parser.next() else { Issue.record("no request"); return }
        #expect(request.path == "/v1/locate")
        #expect(request.queryItem("timeout_secs") == "5")
        #expect(request.queryItem("person") == "Ada L")
        #expect(request.queryItem("plus") == "a b")
        #expect(request.queryItems.contains { $0.name == "flag" && $0.value == nil })
    }

    /// `queryItem` finds the first item by its decoded name, as a look through `queryItems`
    /// does: an escaped name, a repeated one, a flag, an empty value, empty items.
    @Test func queryItemFindsTheFirstByItsDecodedName() {
        var parser = HTTPRequestParser()
        parser.append(Array("GET /?%72eason=first&reason=second&&flag&empty=&a%3Db=c&sp+ace=d HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
        guard case .request(let request)? = parser.next() else { Issue.record("no request"); return }
        #expect(request.queryItem("reason") == "first")
        #expect(request.queryItem("flag") == nil)
        #expect(request.queryItem("empty") == "")
        #expect(request.queryItem("a=b") == "c")
        #expect(request.queryItem("sp ace") == "d")
        #expect(request.queryItem("missing") == nil)
        for name in ["reason", "flag", "empty", "a=b", "sp ace", "missing", "", "%72eason"] {
            #expect(request.queryItem(name) == (request.queryItems.first { $0.name == name }?.value ?? nil), "\(name)")
        }
    }

    /// Escapes decode, "+" is a space, and a "%" without two hex digits stays as it is with
    /// the bytes after it (it once dropped them: "%zz" read as "%").
    @Test func queryValuesDecodeAndKeepBrokenEscapes() {
        var parser = HTTPRequestParser()
        parser.append(Array("GET /?a=%zz&b=x%4&c=%%41&d=%4g&e=+%20&f=%e2%82%ac&g=50%&h=plain HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
        guard case .request(let request)? = parser.next() else { Issue.record("no request"); return }
        let expected = ["a": "%zz", "b": "x%4", "c": "%A", "d": "%4g", "e": "  ", "f": "€", "g": "50%", "h": "plain"]
        for (name, value) in expected {
            #expect(request.queryItem(name) == value, "\(name)")
            #expect(request.queryItems.first { $0.name == name }?.value == value, "\(name)")
        }
    }

    @Test func expectContinueComesBeforeTheBody() {
        #expect(events("POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n") == ["100"])
        #expect(events("POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nok") == ["POST / 2"])
    }

    @Test func headerValuesKeepInnerSpacesAndLoseOuterOnes() {
        var parser = HTTPRequestParser()
        parser.append(Array("GET / HTTP/1.1\r\nHost:x\r\nX-A: \t a  b \t\r\n\r\n".utf8))
        guard case .request(let request)? = parser.next() else { Issue.record("no request"); return }
        #expect(request.headers["x-a"] == "a  b")
        #expect(request.headers["HOST"] == "x")
    }

    @Test func controlCharactersInValuesAreRefused() {
        #expect(events("GET / HTTP/1.1\r\nHost: x\r\nX: a\u{0}b\r\n\r\n") == ["fail 400"])
    }

    @Test func nothingIsParsedAfterAFailure() {
        #expect(events("BAD\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n") == ["fail 400"])
    }
}

@Suite struct FrameDecoderTests {
    func decode(_ bytes: [UInt8], role: WebSocketFrameDecoder.Role = .server, max: Int = 1000) -> [WebSocketFrameDecoder.Event] {
        var decoder = WebSocketFrameDecoder(role: role, maxMessageBytes: max)
        decoder.append(bytes)
        var out: [WebSocketFrameDecoder.Event] = []
        while let event = decoder.next() { out.append(event) }
        return out
    }

    @Test func maskedTextFromAClient() {
        #expect(decode(maskedFrame(opcode: 0x1, fin: true, payload: Array("hi".utf8))) == [.text("hi")])
    }

    @Test func reservedBitsAndUnknownOpcodesAre1002() {
        #expect(decode([0xC1, 0x80, 0, 0, 0, 0]) == [.failure(code: 1002)])
        #expect(decode([0x83, 0x80, 0, 0, 0, 0]) == [.failure(code: 1002)])
    }

    @Test func controlFramesMustBeShortAndFinal() {
        #expect(decode(maskedFrame(opcode: 0x9, fin: false, payload: [])) == [.failure(code: 1002)])
        #expect(decode([0x89, 0xFE, 0, 126, 0, 0, 0, 0] + [UInt8](repeating: 0, count: 126)) == [.failure(code: 1002)])
    }

    @Test func closeFramesAreChecked() {
        #expect(decode(maskedFrame(opcode: 0x8, fin: true, payload: [0x0F, 0xA0] + Array("bye".utf8))) == [.close(code: 4000, reason: "bye")])
        #expect(decode(maskedFrame(opcode: 0x8, fin: true, payload: [])) == [.close(code: nil, reason: "")])
        #expect(decode(maskedFrame(opcode: 0x8, fin: true, payload: [0x03])) == [.failure(code: 1002)])
        #expect(decode(maskedFrame(opcode: 0x8, fin: true, payload: [0x03, 0xED])) == [.failure(code: 1002)])  // 1005
        #expect(decode(maskedFrame(opcode: 0x8, fin: true, payload: [0x03, 0xE8, 0xFF])) == [.failure(code: 1007)])
    }

    @Test func sixtyFourBitLengthsOverTheLimitAre1009() {
        #expect(decode([0x82, 0xFF, 0, 0, 0, 1, 0, 0, 0, 0]) == [.failure(code: 1009)])
        #expect(decode([0x82, 0xFF, 0x80, 0, 0, 0, 0, 0, 0, 0]) == [.failure(code: 1002)])
    }

    @Test func aClientRefusesMaskedServerFrames() {
        #expect(decode(maskedFrame(opcode: 0x1, fin: true, payload: [0x61]), role: .client) == [.failure(code: 1002)])
        #expect(decode([0x81, 0x01, 0x61], role: .client) == [.text("a")])
    }
}
