package faultproxy

import (
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
)

// The Stores below classify the requests each backend of this module sends
// and answer a throttled write as the real service does (status, error code
// and body shape), so that the backend's own error mapping and its client's
// retries act as they would in production.

// GCS is Cloud Storage's JSON API (and XML reads): an object mutation past
// the per-object rate gets 429 with reason rateLimitExceeded.
var GCS = Store{
	Name:     "Cloud Storage",
	Classify: classifyGCS,
	Throttled: func(r *http.Request) *http.Response {
		const msg = "The object exceeded the rate limit for object mutation operations (create, update, and delete). Please reduce your request rate."
		return answer(r, http.StatusTooManyRequests,
			`{"error":{"code":429,"message":"`+msg+`","errors":[{"message":"`+msg+`","domain":"usageLimits","reason":"rateLimitExceeded"}]}}`,
			"Content-Type", "application/json; charset=UTF-8")
	},
}

// S3 is Amazon S3 (and S3 Express One Zone) addressed path-style: a request
// past the rate gets 503 SlowDown.
var S3 = Store{
	Name:     "S3",
	Classify: classifyS3,
	Throttled: func(r *http.Request) *http.Response {
		return answer(r, http.StatusServiceUnavailable,
			`<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`,
			"Content-Type", "application/xml")
	},
}

// AzureBlob is Azure Blob Storage: a request past a partition's target gets
// 503 with error code ServerBusy.
var AzureBlob = Store{
	Name:     "Azure Blob Storage",
	Classify: classifyAzureBlob,
	Throttled: func(r *http.Request) *http.Response {
		return answer(r, http.StatusServiceUnavailable,
			`<?xml version="1.0" encoding="utf-8"?><Error><Code>ServerBusy</Code><Message>The server is currently unable to receive requests. Please retry your request.</Message></Error>`,
			"Content-Type", "application/xml", "x-ms-error-code", "ServerBusy")
	},
}

// DynamoDB returns DynamoDB's JSON API, whose tables key items by the
// string attribute keyAttr: a write past a partition's throughput gets 400
// ThrottlingException with the key-range reason.
func DynamoDB(keyAttr string) Store {
	return Store{
		Name: "DynamoDB",
		Classify: func(r *http.Request, body []byte) (Op, string) {
			return classifyDynamoDB(r, body, keyAttr)
		},
		Throttled: func(r *http.Request) *http.Response {
			return answer(r, http.StatusBadRequest,
				`{"__type":"com.amazonaws.dynamodb.v20120810#ThrottlingException","message":"Throughput exceeds the current throughput limit for your account.","ThrottlingReasons":[{"reason":"TableWriteKeyRangeThroughputExceeded"}]}`,
				"Content-Type", "application/x-amz-json-1.0")
		},
	}
}

// gcsName finds the object name in an upload's metadata (the first JSON
// part of a multipart upload).
var gcsName = regexp.MustCompile(`"name"\s*:\s*"((?:[^"\\]|\\.)*)"`)

func classifyGCS(r *http.Request, body []byte) (Op, string) {
	p := r.URL.EscapedPath()
	bucket, object, hasObject := gcsPath(p)
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		if hasObject {
			return OpRead, bucket + "/" + object
		}
		return OpOther, bucket
	case http.MethodPost, http.MethodPut:
		if strings.Contains(p, "/upload/") {
			name := r.URL.Query().Get("name")
			if name == "" {
				if m := gcsName.FindSubmatch(body); m != nil {
					var s string
					if json.Unmarshal([]byte(`"`+string(m[1])+`"`), &s) == nil {
						name = s
					}
				}
			}
			return OpWrite, bucket + "/" + name
		}
		if hasObject && !strings.Contains(object, "/rewriteTo/") && !strings.Contains(object, "/copyTo/") {
			return OpWrite, bucket + "/" + object
		}
		return OpOther, bucket
	case http.MethodPatch, http.MethodDelete:
		if hasObject {
			return OpWrite, bucket + "/" + object
		}
	}
	return OpOther, bucket
}

// gcsPath splits a JSON API path (.../b/BUCKET/o/OBJECT) or an XML API
// path (/BUCKET/OBJECT).
func gcsPath(p string) (bucket, object string, ok bool) {
	if i := strings.Index(p, "/b/"); i >= 0 {
		rest := p[i+3:]
		b, o, found := strings.Cut(rest, "/o/")
		bucket = unescape(strings.TrimSuffix(b, "/o"))
		if !found || o == "" {
			return bucket, "", false
		}
		return bucket, unescape(o), true
	}
	b, o, found := strings.Cut(strings.TrimPrefix(p, "/"), "/")
	if !found || o == "" {
		return unescape(b), "", false
	}
	return unescape(b), unescape(o), true
}

func unescape(s string) string {
	if u, err := url.PathUnescape(s); err == nil {
		return u
	}
	return s
}

func classifyS3(r *http.Request, _ []byte) (Op, string) {
	p := r.URL.EscapedPath()
	bucket, key, hasKey := strings.Cut(strings.TrimPrefix(p, "/"), "/")
	q := r.URL.Query()
	if !hasKey || key == "" || q.Has("uploads") || q.Has("uploadId") || q.Has("list-type") {
		return OpOther, bucket
	}
	object := unescape(bucket) + "/" + unescape(key)
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		return OpRead, object
	case http.MethodPut, http.MethodDelete:
		return OpWrite, object
	}
	return OpOther, object
}

func classifyAzureBlob(r *http.Request, _ []byte) (Op, string) {
	q := r.URL.Query()
	if q.Get("restype") != "" || q.Get("comp") == "list" {
		return OpOther, r.URL.Path
	}
	object := r.URL.Path
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		return OpRead, object
	case http.MethodPut, http.MethodDelete:
		return OpWrite, object
	}
	return OpOther, object
}

func classifyDynamoDB(r *http.Request, body []byte, keyAttr string) (Op, string) {
	_, action, _ := strings.Cut(r.Header.Get("X-Amz-Target"), ".")
	var op Op
	switch action {
	case "GetItem":
		op = OpRead
	case "PutItem", "UpdateItem", "DeleteItem":
		op = OpWrite
	default:
		return OpOther, ""
	}
	var in struct {
		TableName string
		Key, Item map[string]map[string]any
	}
	_ = json.Unmarshal(body, &in)
	key := in.Key
	if key == nil {
		key = in.Item
	}
	v, _ := key[keyAttr]["S"].(string)
	return op, in.TableName + "/" + v
}
