package main

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/openai/openai-go/v3/packages/respjson"
)

// The SDK's decoder is lenient: a missing required field decodes as its zero
// value and a value of the wrong type is set aside, with no error. conform
// makes that visible: it walks a decoded value and reports each field its
// type declares required (`api:"required"`) that the JSON left out, each
// field whose JSON the decoder could not read as the field's type, and each
// union whose discriminator names no variant the SDK knows.

var fieldType = reflect.TypeOf(respjson.Field{})

// conform returns the problems found in v, each prefixed with path.
func conform(path string, v any) []string {
	var problems []string
	walk(path, reflect.ValueOf(v), &problems, 0)
	return problems
}

func walk(path string, v reflect.Value, problems *[]string, depth int) {
	if !v.IsValid() || depth > 24 {
		return
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			walk(path, v.Elem(), problems, depth+1)
		}
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			walk(fmt.Sprintf("%s[%d]", path, i), v.Index(i), problems, depth+1)
		}
	case reflect.Map:
		iter := v.MapRange()
		for iter.Next() {
			walk(fmt.Sprintf("%s[%v]", path, iter.Key()), iter.Value(), problems, depth+1)
		}
	case reflect.Struct:
		walkStruct(path, v, problems, depth)
	}
}

func walkStruct(path string, v reflect.Value, problems *[]string, depth int) {
	// A discriminated union reads as its variant; an unknown discriminator is a problem.
	if as := v.MethodByName("AsAny"); as.IsValid() && as.Type().NumIn() == 0 && as.Type().NumOut() == 1 {
		variant := as.Call(nil)[0]
		if variant.IsNil() {
			if kind := v.FieldByName("Type"); kind.IsValid() && kind.Kind() == reflect.String && kind.String() != "" {
				*problems = append(*problems, fmt.Sprintf("%s: type %q is no variant of %s", path, kind.String(), v.Type().Name()))
			}
			return
		}
		walk(path, variant, problems, depth+1)
		return
	}
	meta := v.FieldByName("JSON")
	if !meta.IsValid() || meta.Kind() != reflect.Struct {
		return
	}
	for i := 0; i < v.NumField(); i++ {
		f := v.Type().Field(i)
		if !f.IsExported() || f.Name == "JSON" {
			continue
		}
		status := meta.FieldByName(f.Name)
		if !status.IsValid() || status.Type() != fieldType {
			continue
		}
		field := status.Interface().(respjson.Field)
		name := strings.Split(f.Tag.Get("json"), ",")[0]
		at := path + "." + name
		raw := field.Raw()
		switch {
		case raw == respjson.Omitted:
			if strings.Contains(f.Tag.Get("api"), "required") {
				*problems = append(*problems, at+": required, missing")
			}
		case raw == respjson.Null:
			// Null is how the API spells an absent value of a required field (error, usage...).
		case !field.Valid():
			*problems = append(*problems, fmt.Sprintf("%s: not a %s: %.80s", at, f.Type, raw))
		default:
			walk(at, v.Field(i), problems, depth+1)
		}
	}
}
