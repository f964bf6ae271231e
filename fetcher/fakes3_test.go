package fetcher

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeS3 is a minimal S3 server with real semantics for the requests the
// fetcher makes (path-style addressing): ListObjectsV2 with max-keys and
// continuation tokens, HEAD and GET of objects with Range, If-Match, ETag
// and Content-Range, NoSuchBucket / NoSuchKey / PreconditionFailed /
// InvalidAccessKeyId errors. Faults queued with inject apply, in order, to
// the GET object requests that pass the 404/412 checks.
type fakeS3 struct {
	srv       *httptest.Server
	accessKey string       // requests signed with another key get 403
	pageSize  int          // most keys per list page
	conns     atomic.Int32 // connections accepted
	requests  atomic.Int32 // requests received, of any kind

	mu      sync.Mutex
	buckets map[string]map[string]*fakeObject
	faults  []fault
	ranges  []string // Range header of every GET object request
	lists   int      // list requests
	// rewriteList, if set, may change a list page before it is sent
	// (called with mu held, with the request's continuation token).
	rewriteList func(token string, res *listResult)
	// bare416 leaves the true size out of a 416 (no "Content-Range:
	// bytes */N"), as some S3-compatible servers do.
	bare416 atomic.Bool
}

type fakeObject struct {
	data []byte
	etag string // quoted, as S3 sends it
	mod  time.Time
}

type faultKind int

const (
	fault503          faultKind = iota // 503 SlowDown
	fault500                           // 500 InternalError with an XML body
	faultReset                         // right headers, n body bytes, then a TCP reset
	faultShort                         // right headers with Content-Length, n body bytes, then a clean close
	faultStall                         // right headers, n body bytes, then silence until the client leaves
	faultStallHeaders                  // silence before the headers until the client leaves
	faultWhole                         // 200 with the whole object, Range ignored
	faultShift                         // 206 with Content-Range and body shifted by n bytes
	faultChunkedShort                  // no Content-Length, n body bytes, then a clean end
	faultChunkedLong                   // no Content-Length, the range plus n extra bytes
)

type fault struct {
	kind faultKind
	n    int
	then func() // called before the faulty response is written
}

const (
	testAccessKey = "AKIDFAKETEST00000001"
	testSecretKey = "fakeSecretKeyThatMustNeverAppear0000000x"
)

func newFakeS3(t *testing.T) *fakeS3 {
	f := &fakeS3{
		accessKey: testAccessKey,
		pageSize:  1000,
		buckets:   map[string]map[string]*fakeObject{"bucket": {}},
	}
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(f.serve))
	f.srv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			f.conns.Add(1)
		}
	}
	f.srv.Start()
	t.Cleanup(f.srv.Close)
	return f
}

// put stores an object and returns its new ETag.
func (f *fakeS3) put(bucket, key string, data []byte) string {
	sum := md5.Sum(data)
	o := &fakeObject{data: slices.Clone(data), etag: `"` + hex.EncodeToString(sum[:]) + `"`, mod: time.Now().UTC()}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.buckets[bucket][key] = o
	return o.etag
}

func (f *fakeS3) remove(bucket, key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.buckets[bucket], key)
}

func (f *fakeS3) inject(fs ...fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults = append(f.faults, fs...)
}

// getRanges returns the Range headers of the GET object requests so far.
func (f *fakeS3) getRanges() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.ranges)
}

func (f *fakeS3) serve(w http.ResponseWriter, r *http.Request) {
	f.requests.Add(1)
	if !f.authorized(r) {
		writeError(w, r, http.StatusForbidden, "InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist in our records.")
		return
	}
	bucket, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	f.mu.Lock()
	objs, ok := f.buckets[bucket]
	f.mu.Unlock()
	switch {
	case !ok:
		writeError(w, r, http.StatusNotFound, "NoSuchBucket", "The specified bucket does not exist")
	case key == "" && r.Method == http.MethodGet && r.URL.Query().Get("list-type") == "2":
		f.list(w, r, bucket)
	case key != "" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		f.mu.Lock()
		o := objs[key]
		f.mu.Unlock()
		f.object(w, r, o)
	default:
		writeError(w, r, http.StatusNotImplemented, "NotImplemented", "not implemented by the fake")
	}
}

// authorized checks the access key named in a SigV4 Authorization header.
func (f *fakeS3) authorized(r *http.Request) bool {
	_, cred, ok := strings.Cut(r.Header.Get("Authorization"), "Credential=")
	if !ok {
		return false
	}
	id, _, _ := strings.Cut(cred, "/")
	return id == f.accessKey
}

type listResult struct {
	XMLName               xml.Name      `xml:"ListBucketResult"`
	Name                  string        `xml:"Name"`
	Prefix                string        `xml:"Prefix"`
	KeyCount              int           `xml:"KeyCount"`
	MaxKeys               int           `xml:"MaxKeys"`
	IsTruncated           bool          `xml:"IsTruncated"`
	ContinuationToken     string        `xml:"ContinuationToken,omitempty"`
	NextContinuationToken string        `xml:"NextContinuationToken,omitempty"`
	Contents              []listContent `xml:"Contents"`
}

type listContent struct {
	Key          string `xml:"Key"`
	LastModified string `xml:"LastModified"`
	ETag         string `xml:"ETag"`
	Size         int    `xml:"Size"`
	StorageClass string `xml:"StorageClass"`
}

func (f *fakeS3) list(w http.ResponseWriter, r *http.Request, bucket string) {
	q := r.URL.Query()
	prefix, token := q.Get("prefix"), q.Get("continuation-token")
	maxKeys := f.pageSize
	if v, err := strconv.Atoi(q.Get("max-keys")); err == nil && v < maxKeys {
		maxKeys = v
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists++
	var keys []string
	for k := range f.buckets[bucket] {
		if strings.HasPrefix(k, prefix) && k > token {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	res := listResult{Name: bucket, Prefix: prefix, MaxKeys: maxKeys, ContinuationToken: token}
	if len(keys) > maxKeys {
		keys = keys[:maxKeys]
		res.IsTruncated = true
		res.NextContinuationToken = keys[len(keys)-1] // opaque to the client
	}
	for _, k := range keys {
		o := f.buckets[bucket][k]
		res.Contents = append(res.Contents, listContent{
			Key: k, LastModified: o.mod.Format("2006-01-02T15:04:05.000Z"),
			ETag: o.etag, Size: len(o.data), StorageClass: "STANDARD",
		})
	}
	if f.rewriteList != nil {
		f.rewriteList(token, &res)
	}
	res.KeyCount = len(res.Contents)
	w.Header().Set("Content-Type", "application/xml")
	fmt.Fprint(w, xml.Header)
	_ = xml.NewEncoder(w).Encode(res)
}

func (f *fakeS3) object(w http.ResponseWriter, r *http.Request, o *fakeObject) {
	if o == nil {
		writeError(w, r, http.StatusNotFound, "NoSuchKey", "The specified key does not exist.")
		return
	}
	if im := r.Header.Get("If-Match"); im != "" && im != o.etag {
		writeError(w, r, http.StatusPreconditionFailed, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold")
		return
	}
	size := int64(len(o.data))
	h := w.Header()
	h.Set("ETag", o.etag)
	h.Set("Last-Modified", o.mod.Format(http.TimeFormat))
	h.Set("Accept-Ranges", "bytes")
	if r.Method == http.MethodHead {
		h.Set("Content-Length", strconv.FormatInt(size, 10))
		return
	}
	first, last, ok := int64(0), size-1, true
	hasRange := r.Header.Get("Range") != ""
	if hasRange {
		first, last, ok = parseRangeHeader(r.Header.Get("Range"), size)
	}
	if !ok {
		if !f.bare416.Load() {
			h.Set("Content-Range", fmt.Sprintf("bytes */%d", size)) // as S3 sends
		}
		writeError(w, r, http.StatusRequestedRangeNotSatisfiable, "InvalidRange", "The requested range is not satisfiable")
		return
	}
	f.mu.Lock()
	f.ranges = append(f.ranges, r.Header.Get("Range"))
	var ft *fault
	if len(f.faults) > 0 {
		ft = &f.faults[0]
		f.faults = f.faults[1:]
	}
	f.mu.Unlock()
	if ft != nil {
		if ft.then != nil {
			ft.then() // o, the object being served, is unaffected
		}
		f.serveFault(w, r, o, *ft, first, last)
		return
	}
	if hasRange {
		h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", first, last, size))
		h.Set("Content-Length", strconv.FormatInt(last-first+1, 10))
		w.WriteHeader(http.StatusPartialContent)
	} else {
		h.Set("Content-Length", strconv.FormatInt(size, 10))
	}
	_, _ = w.Write(o.data[first : last+1])
}

func (f *fakeS3) serveFault(w http.ResponseWriter, r *http.Request, o *fakeObject, ft fault, first, last int64) {
	size := int64(len(o.data))
	body := o.data[first : last+1]
	h := w.Header()
	rangeHeaders := func() {
		h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", first, last, size))
		h.Set("Content-Length", strconv.Itoa(len(body)))
	}
	switch ft.kind {
	case fault503:
		writeError(w, r, http.StatusServiceUnavailable, "SlowDown", "Please reduce your request rate.")
	case fault500:
		writeError(w, r, http.StatusInternalServerError, "InternalError", "We encountered an internal error. Please try again.")
	case faultReset, faultShort:
		rangeHeaders()
		hijackAndClose(w, http.StatusPartialContent, body[:ft.n], ft.kind == faultReset)
	case faultStall:
		rangeHeaders()
		w.WriteHeader(http.StatusPartialContent)
		_, _ = w.Write(body[:ft.n])
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second): // a client that never gives up fails the test
		}
	case faultStallHeaders:
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	case faultWhole:
		h.Set("Content-Length", strconv.FormatInt(size, 10))
		_, _ = w.Write(o.data)
	case faultShift:
		a, b := min(first+int64(ft.n), size-1), min(last+int64(ft.n), size-1)
		h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", a, b, size))
		h.Set("Content-Length", strconv.FormatInt(b-a+1, 10))
		w.WriteHeader(http.StatusPartialContent)
		_, _ = w.Write(o.data[a : b+1])
	case faultChunkedShort, faultChunkedLong:
		h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", first, last, size))
		w.WriteHeader(http.StatusPartialContent)
		w.(http.Flusher).Flush() // headers out without a length: chunked
		if ft.kind == faultChunkedShort {
			_, _ = w.Write(body[:ft.n])
			return
		}
		_, _ = w.Write(body)
		_, _ = w.Write(make([]byte, ft.n))
	}
}

// hijackAndClose writes a response by hand, with w's headers and the given
// (partial) body, then closes the connection, with a TCP reset if rst.
func hijackAndClose(w http.ResponseWriter, status int, body []byte, rst bool) {
	hdr := w.Header().Clone()
	conn, buf, err := w.(http.Hijacker).Hijack()
	if err != nil {
		panic(err)
	}
	fmt.Fprintf(buf, "HTTP/1.1 %d %s\r\n", status, http.StatusText(status))
	_ = hdr.Write(buf)
	buf.WriteString("\r\n")
	buf.Write(body)
	_ = buf.Flush()
	if tc, ok := conn.(*net.TCPConn); ok && rst {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

func writeError(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("x-amz-request-id", "FAKE0001")
	w.WriteHeader(status)
	if r.Method == http.MethodHead {
		return
	}
	fmt.Fprintf(w, "%s<Error><Code>%s</Code><Message>%s</Message><RequestId>FAKE0001</RequestId></Error>", xml.Header, code, msg)
}

// parseRangeHeader parses "bytes=first-last" (one range, last optional)
// and clamps last to the object.
func parseRangeHeader(s string, size int64) (first, last int64, ok bool) {
	spec, found := strings.CutPrefix(s, "bytes=")
	a, b, found2 := strings.Cut(spec, "-")
	if !found || !found2 {
		return 0, 0, false
	}
	first, err := strconv.ParseInt(a, 10, 64)
	if err != nil || first >= size {
		return 0, 0, false
	}
	last = size - 1
	if b != "" {
		if last, err = strconv.ParseInt(b, 10, 64); err != nil || last < first {
			return 0, 0, false
		}
		last = min(last, size-1)
	}
	return first, last, true
}
