package provider_test

import (
	"context"
	"testing"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/acctest"
)

// TestProviderSchema serves the provider and asks for its schema, which makes
// the framework validate every resource schema (no terraform needed).
func TestProviderSchema(t *testing.T) {
	server, err := acctest.ProtoV6ProviderFactories["sandbox"]()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := server.GetProviderSchema(context.Background(), &tfprotov6.GetProviderSchemaRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range resp.Diagnostics {
		t.Errorf("%s: %s: %s", d.Severity, d.Summary, d.Detail)
	}
	for _, name := range []string{"sandbox_backend", "sandbox_image", "sandbox_volume"} {
		s, ok := resp.ResourceSchemas[name]
		if !ok {
			t.Errorf("resource %s is not served", name)
			continue
		}
		for _, a := range s.Block.Attributes {
			if a.Description == "" {
				t.Errorf("%s.%s has no description (docs are generated from them)", name, a.Name)
			}
		}
	}
}
