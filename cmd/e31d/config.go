package main

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/e31network/e31/market"
	"github.com/pelletier/go-toml/v2"
)

// configError is what is wrong with a config file: each problem at its
// line, with the key as the file writes it and how to fix it.
type configError struct {
	Path     string
	Problems []configProblem
}

// configProblem is one thing wrong in a config file.
type configProblem struct {
	// Line and Column are 1-based; 0 where not known.
	Line, Column int
	// Key is the key as written, its parts joined with "."; "" where the
	// problem is not in one key's value.
	Key string
	// Msg says what is wrong and how to fix it.
	Msg string
	// Context is the file's lines around a syntax error, marked where
	// the parser stopped; "" for other problems.
	Context string
}

func (e *configError) Error() string {
	var b strings.Builder
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString("config " + e.Path)
		if p.Line > 0 {
			fmt.Fprintf(&b, ":%d", p.Line)
			if p.Column > 0 {
				fmt.Fprintf(&b, ":%d", p.Column)
			}
		}
		b.WriteString(": " + p.Msg)
		if p.Context != "" {
			b.WriteString("\n" + strings.TrimRight(p.Context, "\n"))
		}
	}
	return b.String()
}

// decodeConfig reads a config file's content. Every error is a
// *configError.
func decodeConfig(path string, data []byte) (fileConfig, error) {
	var fc fileConfig
	// A document that is not TOML fails its generic decode too, which
	// says where; one that is TOML but does not fit fileConfig decodes
	// into the map, whose values say what the file gave.
	var doc map[string]any
	if err := toml.Unmarshal(data, &doc); err != nil {
		return fc, &configError{Path: path, Problems: []configProblem{syntaxProblem(data, err)}}
	}
	fields := configFields()
	cerr := &configError{Path: path}
	// Unknown keys first, all of them, from a decode that cannot meet a
	// wrong type; then the first wrong type, from the real one.
	loose := reflect.New(looseConfig()).Interface()
	dec := toml.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var missing *toml.StrictMissingError
	if err := dec.Decode(loose); errors.As(err, &missing) {
		for i := range missing.Errors {
			cerr.Problems = append(cerr.Problems, unknownKeyProblem(&missing.Errors[i], doc, fields))
		}
	}
	var de *toml.DecodeError
	switch err := toml.NewDecoder(bytes.NewReader(data)).Decode(&fc); {
	case errors.As(err, &de):
		cerr.Problems = append(cerr.Problems, typeProblem(de, doc, fields))
	case err != nil:
		cerr.Problems = append(cerr.Problems, configProblem{Msg: err.Error()})
	}
	if len(cerr.Problems) == 0 {
		return fc, nil
	}
	slices.SortStableFunc(cerr.Problems, func(a, b configProblem) int { return a.Line - b.Line })
	return fc, cerr
}

// looseConfig is fileConfig with every field's type any: decoding into it
// finds the unknown keys whatever the values' types.
func looseConfig() reflect.Type {
	t := reflect.TypeFor[fileConfig]()
	fields := make([]reflect.StructField, 0, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		fields = append(fields, reflect.StructField{Name: f.Name, Type: reflect.TypeFor[any](), Tag: f.Tag})
	}
	return reflect.StructOf(fields)
}

// configField is one key of the config file.
type configField struct {
	typ reflect.Type
	// duration is set for keys that take a Go duration in a string.
	duration bool
}

// configFields are the config file's keys, from fileConfig's tags.
func configFields() map[string]configField {
	var o options
	var durations []string
	for _, d := range o.durationFlags(&fileConfig{}) {
		durations = append(durations, d.name)
	}
	out := make(map[string]configField)
	t := reflect.TypeFor[fileConfig]()
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if name == "" || name == "-" {
			continue
		}
		out[name] = configField{typ: f.Type, duration: slices.Contains(durations, name)}
	}
	return out
}

func unknownKeyProblem(e *toml.DecodeError, doc map[string]any, fields map[string]configField) configProblem {
	line, col := e.Position()
	key := strings.Join(e.Key(), ".")
	p := configProblem{Line: line, Column: col, Key: key}
	what := "unknown key " + key
	if _, isTable := lookup(doc, e.Key()).(map[string]any); isTable && len(e.Key()) == 1 {
		what = "unknown table [" + key + "]; the config has no tables, its keys go at the top of the file"
	}
	known := make([]string, 0, len(fields))
	for k := range fields {
		known = append(known, k)
	}
	slices.Sort(known)
	last := e.Key()[len(e.Key())-1]
	switch near := market.Nearest(strings.ToLower(last), known); {
	case near != "":
		p.Msg = what + "; did you mean " + near + "?"
	default:
		p.Msg = what + "; the keys are e31d's flags' long names (e31d --help)"
	}
	return p
}

func typeProblem(e *toml.DecodeError, doc map[string]any, fields map[string]configField) configProblem {
	line, col := e.Position()
	key := strings.Join(e.Key(), ".")
	p := configProblem{Line: line, Column: col, Key: key}
	f, ok := fields[firstPart(e.Key())]
	if !ok {
		p.Msg = strings.TrimPrefix(e.Error(), "toml: ")
		return p
	}
	p.Msg = fmt.Sprintf("%s wants %s, got %s", key, f.want(), describeValue(lookup(doc, e.Key()[:1])))
	return p
}

func syntaxProblem(data []byte, err error) configProblem {
	var de *toml.DecodeError
	if !errors.As(err, &de) {
		return configProblem{Msg: err.Error()}
	}
	line, col := de.Position()
	key := strings.Join(de.Key(), ".")
	p := configProblem{Line: line, Column: col, Key: key, Context: de.String()}
	p.Msg = "not TOML: " + strings.TrimPrefix(de.Error(), "toml: ")
	// A value left unquoted is the likeliest slip in a file of strings.
	name, value, ok := lineKeyValue(data, line)
	f, known := configFields()[name]
	if ok && known && f.typ.Kind() == reflect.String && !quoted(value) {
		p.Msg += "; " + name + " wants " + f.want()
	}
	return p
}

// lineKeyValue splits a line (1-based) of a config file at its "=": the
// key, unquoted, and the value, both trimmed.
func lineKeyValue(data []byte, line int) (key string, value []byte, ok bool) {
	lines := bytes.Split(data, []byte("\n"))
	if line < 1 || line > len(lines) {
		return "", nil, false
	}
	k, v, ok := bytes.Cut(lines[line-1], []byte("="))
	return string(bytes.Trim(bytes.TrimSpace(k), `"'`)), bytes.TrimSpace(v), ok
}

func quoted(v []byte) bool { return len(v) > 0 && (v[0] == '"' || v[0] == '\'') }

// want is the TOML a key takes, in words.
func (f configField) want() string {
	switch {
	case f.duration:
		return `a duration in quotes, such as "30s"`
	case f.typ.Kind() == reflect.Bool, f.typ.Kind() == reflect.Pointer && f.typ.Elem().Kind() == reflect.Bool:
		return "true or false"
	case f.typ.Kind() == reflect.Int:
		return "a whole number"
	case f.typ.Kind() == reflect.Slice:
		return `a list of strings in quotes, such as ["a", "b"]`
	}
	return "a string in quotes"
}

// describeValue names what a generic decode gave, in TOML's words.
func describeValue(v any) string {
	switch v := v.(type) {
	case string:
		return "a string"
	case int64:
		return "a whole number"
	case float64:
		return "a number with a fraction"
	case bool:
		return "true or false"
	case time.Time, toml.LocalDate, toml.LocalTime, toml.LocalDateTime:
		return "a date or time"
	case map[string]any:
		return "a table"
	case []any:
		for _, e := range v {
			if _, ok := e.(string); !ok {
				return "a list holding " + describeValue(e)
			}
		}
		return "a list"
	}
	return "another type"
}

// lookup follows a key's parts through a generic decode; nil where a part
// is missing.
func lookup(doc map[string]any, key []string) any {
	var v any = doc
	for _, k := range key {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func firstPart(key []string) string {
	if len(key) == 0 {
		return ""
	}
	return key[0]
}

// keyPosition finds the line and column (1-based) of a top-level key's
// value in a config file, for errors found after decoding; 0, 0 where the
// key is not found.
func keyPosition(data []byte, key string) (line, col int) {
	for i, l := range bytes.Split(data, []byte("\n")) {
		name, v, ok := lineKeyValue(data, i+1)
		if !ok || name != key || len(v) == 0 {
			continue
		}
		return i + 1, bytes.Index(l, v) + 1
	}
	return 0, 0
}

// durationProblem is a duration key whose value does not parse.
func durationProblem(path string, data []byte, key, value string) error {
	line, col := keyPosition(data, key)
	return &configError{Path: path, Problems: []configProblem{{Line: line, Column: col, Key: key,
		Msg: fmt.Sprintf("%s = %q is not a duration; it wants a number and a unit, such as \"30s\", \"5m\" or \"1h30m\"", key, value)}}}
}
