package widget

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"net"
	"net/http"
	"net/url"
	"testing"

	fws "github.com/fasthttp/websocket"
)

// The frames the widget writes itself, read by the websocket library's own client: every
// length encoding (7-bit, 16-bit, 64-bit), a pong and a close with its code and reason.
func TestFramesReadByALibraryClient(t *testing.T) {
	client, server := net.Pipe()
	defer client.Close()
	sizes := []int{0, 1, 125, 126, 127, 65535, 65536, 70000}
	go func() {
		defer server.Close()
		req, err := http.ReadRequest(bufio.NewReader(server))
		if err != nil {
			t.Error(err)
			return
		}
		sum := sha1.Sum([]byte(req.Header.Get("Sec-WebSocket-Key") + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
		var out []byte
		out = append(out, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: "+
			base64.StdEncoding.EncodeToString(sum[:])+"\r\n\r\n"...)
		for _, n := range sizes {
			out = appendFrame(out, opText, bytes.Repeat([]byte{'a' + byte(n%26)}, n))
		}
		out = appendFrame(out, opPong, []byte("p"))
		out = appendFrame(out, opClose, fws.FormatCloseMessage(fws.CloseTryAgainLater, "too slow"))
		if _, err := server.Write(out); err != nil {
			t.Error(err)
		}
	}()
	u, _ := url.Parse("ws://widget.test/v1/widget/ws")
	ws, _, err := fws.NewClient(client, u, nil, 1024, 1024)
	if err != nil {
		t.Fatal(err)
	}
	pongs := 0
	ws.SetPongHandler(func(data string) error {
		if data == "p" {
			pongs++
		}
		return nil
	})
	for _, n := range sizes {
		typ, data, err := ws.ReadMessage()
		if err != nil {
			t.Fatalf("frame of %d bytes: %v", n, err)
		}
		if typ != fws.TextMessage || !bytes.Equal(data, bytes.Repeat([]byte{'a' + byte(n%26)}, n)) {
			t.Fatalf("frame of %d bytes read as type %d, %d bytes", n, typ, len(data))
		}
	}
	_, _, err = ws.ReadMessage()
	var ce *fws.CloseError
	if !errors.As(err, &ce) || ce.Code != fws.CloseTryAgainLater || ce.Text != "too slow" {
		t.Fatalf("after the frames: %v, want close 1013 \"too slow\"", err)
	}
	if pongs != 1 {
		t.Fatalf("%d pongs read, want 1", pongs)
	}
}
