package faults

import (
	"bufio"
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// Marker is part of every error body the proxy writes, so that a test can
// search reads and cache files for injected error bytes.
const Marker = "segfs-injected-fault"

func awsCredentials(id, secret string) aws.Credentials {
	return aws.Credentials{AccessKeyID: id, SecretAccessKey: secret, Source: "faults"}
}

// inject answers r with rule's fault.
func (p *Proxy) inject(w http.ResponseWriter, r *http.Request, req request, rule *Rule) {
	switch rule.Fault {
	case SlowDown:
		p.applied(rule)
		writeError(w, r, http.StatusServiceUnavailable, "SlowDown", "Please reduce your request rate.")
	case InternalError:
		p.applied(rule)
		writeError(w, r, http.StatusInternalServerError, "InternalError", "We encountered an internal error. Please try again.")
	case ErrorBody200:
		p.applied(rule)
		writeError(w, r, http.StatusOK, "InternalError", "An error document sent as a 200 answer.")
	case StallHeaders:
		p.applied(rule)
		if !p.stallUntil(r.Context(), rule.Stall) {
			panic(http.ErrAbortHandler) // no answer at all, not an empty 200
		}
		p.pass(w, r, nil)
	case WholeObject:
		p.forwardFaulty(w, r, rule, func(out *http.Request) { out.Header.Del("Range") })
	case ShiftRange:
		first, last, ok := parseRange(r.Header.Get("Range"))
		if !ok {
			p.pass(w, r, nil) // nothing to shift
			return
		}
		shift := rule.Bytes
		if shift < 0 {
			shift = 1 + p.randInt64(64<<10)
		}
		if shift == 0 {
			shift = 1
		}
		if first < shift {
			shift = -shift // towards the end
		}
		rng := fmt.Sprintf("bytes=%d-%d", first-shift, last-shift)
		resp, err := p.roundTrip(r, func(out *http.Request) { out.Header.Set("Range", rng) })
		if err != nil {
			upstreamFailed(w, r, err)
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusRequestedRangeNotSatisfiable {
			// Shifted past the end of a small object: no fault then,
			// rather than a 416 the client never asked for.
			p.pass(w, r, nil)
			return
		}
		if resp.StatusCode/100 == 2 {
			p.applied(rule)
		}
		copyResponse(w, resp, r.Method)
	case Reset, Short, Stall:
		p.bodyFault(w, r, rule)
	case ListAppend:
		p.listAppend(w, r, rule)
	case ListResize:
		p.listResize(w, r, rule)
	default:
		p.pass(w, r, nil)
	}
}

// forwardFaulty forwards the request changed by change and copies the
// answer, counting the fault if the upstream answered 2xx.
func (p *Proxy) forwardFaulty(w http.ResponseWriter, r *http.Request, rule *Rule, change func(*http.Request)) {
	resp, err := p.roundTrip(r, change)
	if err != nil {
		upstreamFailed(w, r, err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 2 {
		p.applied(rule)
	}
	copyResponse(w, resp, r.Method)
}

// bodyFault forwards the request and spoils the body of a 2xx answer:
// a reset or a clean close after some bytes, or a pause.
func (p *Proxy) bodyFault(w http.ResponseWriter, r *http.Request, rule *Rule) {
	resp, err := p.roundTrip(r, nil)
	if err != nil {
		upstreamFailed(w, r, err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 || r.Method == http.MethodHead {
		copyResponse(w, resp, r.Method)
		return
	}
	n := rule.Bytes
	if n < 0 {
		n = p.randInt64(max(resp.ContentLength, 1))
	}
	if resp.ContentLength >= 0 {
		n = min(n, resp.ContentLength)
	}
	head := make([]byte, n)
	got, err := io.ReadFull(resp.Body, head)
	if err != nil && got < len(head) {
		// The upstream body failed on its own: pass on what came.
		head = head[:got]
	}
	p.applied(rule)
	if rule.Fault == Stall {
		copyHeaders(w.Header(), resp.Header)
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(head)
		flush(w)
		if !p.stallUntil(r.Context(), rule.Stall) {
			panic(http.ErrAbortHandler) // drop the connection mid-body
		}
		copyBody(w, resp.Body)
		return
	}
	hijackAndClose(w, resp, head, rule.Fault == Reset)
}

// hijackAndClose writes resp's status line and headers and the given part
// of its body by hand, then closes the connection: with a TCP reset if rst,
// else cleanly, so that the body ends before its Content-Length.
func hijackAndClose(w http.ResponseWriter, resp *http.Response, body []byte, rst bool) {
	conn, buf, err := w.(http.Hijacker).Hijack()
	if err != nil {
		http.Error(w, "faults: hijack: "+err.Error(), http.StatusInternalServerError)
		return
	}
	h := resp.Header.Clone()
	removeHopHeaders(h)
	if resp.ContentLength >= 0 {
		h.Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
	}
	writeRaw(buf, resp.StatusCode, h, body)
	if tc, ok := conn.(*net.TCPConn); ok && rst {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

func writeRaw(buf *bufio.ReadWriter, status int, h http.Header, body []byte) {
	fmt.Fprintf(buf, "HTTP/1.1 %d %s\r\n", status, http.StatusText(status))
	_ = h.Write(buf)
	_, _ = buf.WriteString("\r\n")
	_, _ = buf.Write(body)
	_ = buf.Flush()
}

// listAppend forwards a LIST and adds the rule's entries, those below the
// request's prefix, to the first page of a 2xx answer.
func (p *Proxy) listAppend(w http.ResponseWriter, r *http.Request, rule *Rule) {
	q := r.URL.Query()
	if q.Get("continuation-token") != "" || q.Get("marker") != "" {
		p.pass(w, r, nil)
		return
	}
	p.editList(w, r, rule, func(body []byte, enc bool) ([]byte, bool) {
		end := bytes.LastIndex(body, []byte("</ListBucketResult>"))
		if end < 0 {
			return body, false
		}
		var extra bytes.Buffer
		prefix := q.Get("prefix")
		modified := time.Now().UTC().Format("2006-01-02T15:04:05.000Z")
		for _, e := range rule.Entries {
			if !strings.HasPrefix(e.Key, prefix) {
				continue
			}
			etag := e.ETag
			if etag == "" {
				etag = `"00000000000000000000000000000000"`
			}
			extra.WriteString("<Contents><Key>")
			writeKey(&extra, e.Key, enc)
			fmt.Fprintf(&extra, "</Key><LastModified>%s</LastModified><ETag>", modified)
			_ = xml.EscapeText(&extra, []byte(etag))
			fmt.Fprintf(&extra, "</ETag><Size>%d</Size><StorageClass>STANDARD</StorageClass></Contents>", e.Size)
		}
		return slices.Concat(body[:end], extra.Bytes(), body[end:]), true
	})
}

// listResize forwards a LIST and gives each listed key the rule's
// entries name the entry's size, on every page of a 2xx answer.
func (p *Proxy) listResize(w http.ResponseWriter, r *http.Request, rule *Rule) {
	p.editList(w, r, rule, func(body []byte, enc bool) ([]byte, bool) {
		changed := false
		for _, e := range rule.Entries {
			var b bytes.Buffer
			b.WriteString("<Key>")
			writeKey(&b, e.Key, enc)
			b.WriteString("</Key>")
			var ok bool
			body, ok = setSize(body, b.Bytes(), e.Size)
			changed = changed || ok
		}
		return body, changed
	})
}

// setSize sets the <Size> of the <Contents> whose <Key> element is key,
// if body lists it.
func setSize(body, key []byte, size int64) ([]byte, bool) {
	at := bytes.Index(body, key)
	if at < 0 {
		return body, false
	}
	from := bytes.LastIndex(body[:at], []byte("<Contents>"))
	n := bytes.Index(body[at:], []byte("</Contents>"))
	if from < 0 || n < 0 {
		return body, false
	}
	contents := body[from : at+n]
	open := bytes.Index(contents, []byte("<Size>"))
	if open < 0 {
		return body, false
	}
	open += from + len("<Size>")
	end := bytes.Index(body[open:], []byte("</Size>"))
	if end < 0 {
		return body, false
	}
	return slices.Concat(body[:open], []byte(strconv.FormatInt(size, 10)), body[open+end:]), true
}

// editList forwards a LIST and answers with its body as edit returns it,
// counting the fault if edit changed it; if it did not, the upstream's
// answer goes out as it came. An answer other than 2xx is passed on.
//
// A request with encoding-type=url gets an answer whose keys are URL
// encoded, as S3 sends it (the one way a listing can carry a key XML
// cannot hold, such as one with a NUL): when the upstream ignored the
// parameter, the proxy encodes its keys and says so in EncodingType. edit
// is told whether the answer is encoded, to write its keys that way.
func (p *Proxy) editList(w http.ResponseWriter, r *http.Request, rule *Rule, edit func(body []byte, enc bool) ([]byte, bool)) {
	resp, err := p.roundTrip(r, nil)
	if err != nil {
		upstreamFailed(w, r, err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		copyResponse(w, resp, r.Method)
		return
	}
	const maxList = 64 << 20
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxList))
	if err != nil {
		http.Error(w, "faults: read list: "+err.Error(), http.StatusBadGateway)
		return
	}
	work, enc := body, bytes.Contains(body, []byte(encodedList))
	if !enc && r.URL.Query().Get("encoding-type") == "url" {
		work, enc = urlEncodeList(body)
	}
	if out, changed := edit(work, enc); changed {
		p.applied(rule)
		body = out
	}
	copyHeaders(w.Header(), resp.Header)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(body)
}

// encodedList is the element of a listing whose keys are URL encoded.
const encodedList = "<EncodingType>url</EncodingType>"

// urlEncodeList returns the listing body with the text of its Key,
// Prefix, StartAfter and Delimiter elements URL encoded, as S3 encodes
// them for encoding-type=url, and an EncodingType element saying so. It
// returns body and false if body is not a listing it can encode.
func urlEncodeList(body []byte) ([]byte, bool) {
	start := bytes.Index(body, []byte("<ListBucketResult"))
	if start < 0 {
		return body, false
	}
	gt := bytes.IndexByte(body[start:], '>')
	if gt < 0 {
		return body, false
	}
	at := start + gt + 1
	// versitygw sends an empty EncodingType of its own, later.
	out := slices.Concat(body[:at], []byte(encodedList), dropElements(body[at:], "EncodingType"))
	for _, tag := range []string{"Key", "Prefix", "StartAfter", "Delimiter"} {
		var ok bool
		if out, ok = urlEncodeElements(out, tag); !ok {
			return body, false
		}
	}
	return out, true
}

// urlEncodeElements URL encodes the text of every <tag> element of body.
func urlEncodeElements(body []byte, tag string) ([]byte, bool) {
	open, closing := []byte("<"+tag+">"), []byte("</"+tag+">")
	var out bytes.Buffer
	for {
		i := bytes.Index(body, open)
		if i < 0 {
			out.Write(body)
			return out.Bytes(), true
		}
		i += len(open)
		j := bytes.Index(body[i:], closing)
		if j < 0 {
			return nil, false
		}
		text, ok := xmlText(body[i : i+j])
		if !ok {
			return nil, false
		}
		out.Write(body[:i])
		out.WriteString(url.QueryEscape(text))
		body = body[i+j:]
	}
}

// dropElements removes every <tag> element (childless) from body.
func dropElements(body []byte, tag string) []byte {
	body = bytes.ReplaceAll(body, []byte("<"+tag+"/>"), nil)
	open, closing := []byte("<"+tag+">"), []byte("</"+tag+">")
	for {
		i := bytes.Index(body, open)
		if i < 0 {
			return body
		}
		j := bytes.Index(body[i:], closing)
		if j < 0 {
			return body
		}
		body = slices.Concat(body[:i], body[i+j+len(closing):])
	}
}

// xmlText decodes the character data of an element.
func xmlText(data []byte) (string, bool) {
	if !bytes.ContainsRune(data, '&') {
		return string(data), true
	}
	var s string
	err := xml.Unmarshal(slices.Concat([]byte("<x>"), data, []byte("</x>")), &s)
	return s, err == nil
}

// writeKey writes key as the text of a listing's Key element: URL
// encoded if enc, else as XML text, with the control characters XML
// cannot hold (NUL among them) as character references. XML has no way
// to carry those: a listing that holds one without encoding-type=url
// fails to decode, whatever the server does.
func writeKey(b *bytes.Buffer, key string, enc bool) {
	if enc {
		b.WriteString(url.QueryEscape(key))
		return
	}
	for _, c := range key {
		switch {
		case c < 0x20 && c != '\t' && c != '\n' && c != '\r':
			fmt.Fprintf(b, "&#x%X;", c)
		default:
			_ = xml.EscapeText(b, []byte(string(c)))
		}
	}
}

// writeError writes an S3 XML error answer (no body for HEAD).
func writeError(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	body := fmt.Sprintf("%s<Error><Code>%s</Code><Message>%s (%s)</Message><Resource>%s</Resource><RequestId>%s</RequestId></Error>",
		xml.Header, code, msg, Marker, xmlEscape(r.URL.Path), "FAULT0000000001")
	h := w.Header()
	h.Set("Content-Type", "application/xml")
	h.Set("x-amz-request-id", "FAULT0000000001")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = io.WriteString(w, body)
	}
}

func xmlEscape(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// copyResponse writes resp's status, headers and body to w.
func copyResponse(w http.ResponseWriter, resp *http.Response, method string) {
	copyHeaders(w.Header(), resp.Header)
	if resp.ContentLength >= 0 {
		w.Header().Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
	}
	w.WriteHeader(resp.StatusCode)
	if method != http.MethodHead {
		copyBody(w, resp.Body)
	}
}

func copyHeaders(dst, src http.Header) {
	for k, vs := range src {
		dst[k] = append([]string(nil), vs...)
	}
	removeHopHeaders(dst)
}

// copyBody streams body to w, flushing each chunk so that the client sees
// the upstream's pace.
func copyBody(w http.ResponseWriter, body io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			flush(w)
		}
		if err != nil {
			return
		}
	}
}

func flush(w http.ResponseWriter) {
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// parseRange parses "bytes=first-last".
func parseRange(s string) (first, last int64, ok bool) {
	spec, found := strings.CutPrefix(s, "bytes=")
	a, b, found2 := strings.Cut(spec, "-")
	if !found || !found2 {
		return 0, 0, false
	}
	first, err1 := strconv.ParseInt(a, 10, 64)
	last, err2 := strconv.ParseInt(b, 10, 64)
	if err1 != nil || err2 != nil || first < 0 || last < first {
		return 0, 0, false
	}
	return first, last, true
}

// upstreamFailed answers 502 for a request the upstream could not answer,
// or drops the connection if the client left or the proxy is closing.
func upstreamFailed(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		panic(http.ErrAbortHandler)
	}
	http.Error(w, err.Error(), http.StatusBadGateway)
}
