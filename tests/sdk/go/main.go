// Command sdkflows drives a ptc-emulator server with the official Go SDK,
// github.com/openai/openai-go/v3, through the flows the project's SDK matrix
// runs in every language: the PTC guide's continuation loop (store:false and
// previous_response_id), a streamed loop, a WebSocket lane, compaction, a
// conversation and the Agents API's function-tool flow.
//
//	sdkflows version
//	sdkflows FLOW BASE_URL
//
// BASE_URL is the server's /v1 URL (a scoped one puts every request in that
// scope); the API key is read from OPENAI_API_KEY. A flow prints one JSON
// object on stdout (what the client saw, for the caller to check against the
// server's journal) and exits 0; any error exits 1 with the reason on stderr.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"sort"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// sdkModule is the module whose version the binary reports.
const sdkModule = "github.com/openai/openai-go/v3"

// flow is one subcommand: it drives the server and fills in the result.
type flow func(ctx context.Context, client openai.Client, out *result) error

// flows holds every flow this build has; a file may add one in init (the
// WebSocket flow exists only in releases that have Responses WebSockets).
var flows = map[string]flow{
	"store_false":          storeFalseLoop,
	"previous_response_id": previousResponseIDLoop,
	"stream":               streamedLoop,
	"compact":              compactedLoop,
	"conversation":         conversationLoop,
	"agents":               agentsFunctionTool,
}

// absent names flows this build leaves out, with the reason.
var absent = map[string]string{}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "sdkflows:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 1 && args[0] == "version" {
		version, err := sdkVersion()
		if err != nil {
			return err
		}
		fmt.Println(version)
		return nil
	}
	if len(args) == 1 && args[0] == "flows" {
		names := make([]string, 0, len(flows))
		for name := range flows {
			names = append(names, name)
		}
		sort.Strings(names)
		return json.NewEncoder(os.Stdout).Encode(map[string]any{"flows": names, "absent": absent})
	}
	if len(args) != 2 {
		return errors.New("usage: sdkflows version | sdkflows flows | sdkflows FLOW BASE_URL")
	}
	name, baseURL := args[0], args[1]
	do, ok := flows[name]
	if !ok {
		if why, known := absent[name]; known {
			return fmt.Errorf("flow %q is not in this build: %s", name, why)
		}
		return fmt.Errorf("unknown flow %q", name)
	}
	key := os.Getenv("OPENAI_API_KEY")
	if key == "" {
		return errors.New("OPENAI_API_KEY is not set")
	}
	version, err := sdkVersion()
	if err != nil {
		return err
	}
	client := openai.NewClient(
		option.WithBaseURL(baseURL),
		option.WithAPIKey(key),
		option.WithMaxRetries(0), // a retry would hide the first answer's fault
	)
	// Bounds the whole flow: a server that never answers fails it instead of hanging it.
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	out := &result{Flow: name, SDK: version, Problems: []string{}}
	if err := do(ctx, client, out); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	encoder := json.NewEncoder(os.Stdout)
	encoder.SetEscapeHTML(false)
	return encoder.Encode(out)
}

// sdkVersion is the openai-go release this binary was built with, as the Go
// toolchain recorded it.
func sdkVersion() (string, error) {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "", errors.New("the binary carries no build information")
	}
	for _, dep := range info.Deps {
		if dep.Path == sdkModule {
			if dep.Replace != nil {
				return dep.Replace.Version, nil
			}
			return dep.Version, nil
		}
	}
	return "", fmt.Errorf("%s is not among the binary's dependencies", sdkModule)
}
