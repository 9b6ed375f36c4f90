package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// UnknownFieldError reports a key that is not part of the schema.
type UnknownFieldError struct {
	// Path is the full path of the key, e.g. "antreaProxy.proxyLoadBalancerIP".
	Path string
	// Suggestion is a known key at the same level that looks like the
	// unknown one ("" if none does).
	Suggestion string
}

func (e *UnknownFieldError) Error() string {
	msg := fmt.Sprintf("unknown field %q", e.Path)
	if e.Suggestion != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", e.Suggestion)
	}
	return msg
}

// Load reads the antrea-agent.conf at path; see Parse.
func Load(path string) (*AgentConfig, error) { return LoadWithEnv(path, OSEnv()) }

// LoadWithEnv is Load with an explicit environment for defaulting.
func LoadWithEnv(path string, env Env) (*AgentConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading antrea-agent config: %w", err)
	}
	c, err := ParseWithEnv(data, env)
	if err != nil {
		return nil, fmt.Errorf("loading antrea-agent config %s: %w", path, err)
	}
	return c, nil
}

// Parse decodes antrea-agent.conf content strictly (unknown keys and values
// of the wrong type are errors naming the key's full path), applies the
// defaults with the running process's environment, and validates. Empty
// content yields the defaults. All decode problems, or else all validation
// problems, are reported together.
func Parse(data []byte) (*AgentConfig, error) { return ParseWithEnv(data, OSEnv()) }

// ParseWithEnv is Parse with an explicit environment for defaulting.
func ParseWithEnv(data []byte, env Env) (*AgentConfig, error) {
	c, schemaErrs, err := decode(data)
	if err != nil {
		return nil, err
	}
	c.DefaultsFrom(env)
	// Report schema problems (unknown keys, wrong types) and validation problems together, so
	// one run of the agent names everything that is wrong with the file. A field with a schema
	// problem is reported once, by its schema error.
	errs := schemaErrs
	bad := map[string]bool{}
	for _, e := range schemaErrs {
		var fe *FieldError
		if errors.As(e, &fe) {
			bad[fe.Path] = true
		}
	}
	if verr := c.Validate(); verr != nil {
		for _, e := range unjoin(verr) {
			var fe *FieldError
			if errors.As(e, &fe) && bad[fe.Path] {
				continue
			}
			errs = append(errs, e)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return c, nil
}

// unjoin returns the errors joined in err, or err alone.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// Marshal renders c as YAML (keys sorted), e.g. for antctl. Parse accepts
// the output.
func (c *AgentConfig) Marshal() ([]byte, error) {
	out, err := yaml.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("marshaling antrea-agent config: %w", err)
	}
	return out, nil
}

// decode converts YAML to an AgentConfig without defaulting or validating. A YAML syntax error
// is fatal (err); keys and values that do not fit the schema are returned as schemaErrs, and the
// rest of the file is still decoded so that validation can report its problems too.
func decode(data []byte) (c *AgentConfig, schemaErrs []error, err error) {
	// Strict conversion rejects YAML syntax errors and duplicate keys.
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, nil, fmt.Errorf("parsing antrea-agent config as YAML: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	var generic any
	if err := dec.Decode(&generic); err != nil {
		return nil, nil, fmt.Errorf("parsing antrea-agent config: %w", err)
	}
	// encoding/json matches keys case-insensitively, names only the last
	// key of an unknown path and stops at the first error; checking the
	// generic tree against the schema first gives exact, complete errors.
	checkValue("", generic, reflect.TypeFor[AgentConfig](), &schemaErrs)
	c = &AgentConfig{}
	if len(schemaErrs) > 0 {
		// Best effort: encoding/json skips values of the wrong type and decodes the rest.
		_ = json.Unmarshal(js, c)
		return c, schemaErrs, nil
	}
	dec = json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(c); err != nil {
		// Not expected once checkValue passed; kept as a safety net.
		return nil, nil, fmt.Errorf("decoding antrea-agent config: %w", err)
	}
	return c, nil, nil
}

// checkValue appends an error for every part of v (a tree decoded from
// JSON with UseNumber) that does not fit type t. null is accepted anywhere
// and means "unset".
func checkValue(path string, v any, t reflect.Type, errs *[]error) {
	if v == nil {
		return
	}
	typeErr := func(want string) {
		*errs = append(*errs, fieldErr(path, "expected %s, got %s", want, describe(v)))
	}
	if t == reflect.TypeFor[Duration]() {
		s, ok := v.(string)
		if !ok {
			typeErr(`a duration string such as "1s"`)
			return
		}
		var d Duration
		b, _ := json.Marshal(s)
		if err := d.UnmarshalJSON(b); err != nil {
			*errs = append(*errs, fieldErr(path, "%v", err))
		}
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		checkValue(path, v, t.Elem(), errs)
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			typeErr("a mapping")
			return
		}
		fields := jsonFields(t)
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			sub := joinPath(path, k)
			f, ok := fields[k]
			if !ok {
				*errs = append(*errs, &UnknownFieldError{Path: sub, Suggestion: suggest(k, fields)})
				continue
			}
			checkValue(sub, m[k], f, errs)
		}
	case reflect.Slice:
		list, ok := v.([]any)
		if !ok {
			typeErr("a list")
			return
		}
		for i, e := range list {
			checkValue(fmt.Sprintf("%s[%d]", path, i), e, t.Elem(), errs)
		}
	case reflect.String:
		switch v.(type) {
		case string:
		case bool:
			// YAML 1.1 reads unquoted y/n/yes/no/on/off as booleans.
			typeErr("a string (quote the value: unquoted yes/no/on/off/y/n are YAML booleans)")
		default:
			typeErr("a string (quote the value)")
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			typeErr("a boolean (true or false)")
		}
	case reflect.Int:
		if n, ok := v.(json.Number); !ok {
			typeErr("an integer")
		} else if _, err := n.Int64(); err != nil {
			typeErr("an integer")
		}
	default:
		*errs = append(*errs, fieldErr(path, "internal error: schema type %v is not supported", t))
	}
}

// jsonFields maps the JSON key of each field of struct type t to its type.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := make(map[string]reflect.Type, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func describe(v any) string {
	switch v := v.(type) {
	case string:
		return fmt.Sprintf("string %q", v)
	case bool:
		return fmt.Sprintf("boolean %t", v)
	case json.Number:
		return "number " + v.String()
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	default:
		return fmt.Sprintf("%T", v)
	}
}

// suggest returns the known key closest to key: one differing only in case,
// else one within edit distance 2; "" if none.
func suggest(key string, fields map[string]reflect.Type) string {
	best, bestDist := "", 3
	for name := range fields {
		if strings.EqualFold(name, key) {
			return name
		}
		if d := editDistance(strings.ToLower(key), strings.ToLower(name)); d < bestDist || (d == bestDist && name < best) {
			best, bestDist = name, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
