package docker

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/internal/testfiles"
)

const urlsHCL = `
provider "scripted" {
  script "visitor" {
    reply {
      call "note_url" {
        arguments = {}
      }
    }
    reply {
      text = "visited"
    }
  }
}

provider "docker" {}

sandbox "web" {
  provider = provider.docker
  image    = "@IMAGE@"
  network  = "bridge"
  ports    = [8080]
  on_exit  = "stop"
}

capability "command" "note_url" {
  description = "Write the preview URL down."
  command     = ["sh", "-c", "echo \"$AGENTCTL_URL_8080\" > url.txt; echo noted"]
}

agent "visitor" {
  provider     = provider.scripted
  instructions = "Visit the site."
  sandbox      = sandbox.web
  capabilities = [capability.command.note_url]
}

run "visit" {
  agent = agent.visitor
  input = "Open ${sandbox.web.urls["8080"]} and check it."
}
`

// A run whose input takes a sandbox URL: a fresh plan shows the input as
// known after the sandbox is created (with -target too), apply gives the
// run the URL the sandbox really has (in its input and, for a command
// tool, as AGENTCTL_URL_8080), and the run's digest does not depend on
// the URL, so the plan converges although a stopped container comes back
// on new host ports.
func TestDockerRunInputURL(t *testing.T) {
	p := testProvider(t)
	dir := t.TempDir()
	testfiles.WriteTree(t, dir, map[string]string{"urls.hcl": strings.ReplaceAll(urlsHCL, "@IMAGE@", TestImage)})
	c := newCLI(t, dir, "urls.hcl")
	c.destroyOnCleanup(p)

	for _, args := range [][]string{{"plan", "urls.hcl"}, {"plan", "-target=run.visit", "urls.hcl"}} {
		out := c.OK(args...)
		mustContain(t, strings.Join(args, " "), out, "(known after sandbox.web is created)", "# run.visit will be executed")
	}

	// checkRun says the run got the sandbox's recorded URL, in its input
	// and in the command tool's environment.
	checkRun := func(what string) string {
		t.Helper()
		st := c.MustState()
		url := st.Sandboxes["sandbox.web"].URLs["8080"]
		if !strings.HasPrefix(url, "http://") {
			t.Fatalf("%s: recorded URL %q", what, url)
		}
		if got := c.Exec("sandbox.web", "cat url.txt"); got != url+"\n" {
			t.Errorf("%s: AGENTCTL_URL_8080 = %q, recorded URL %q", what, got, url)
		}
		journal, err := os.ReadFile(filepath.Join(c.StateDir(), st.Runs["run.visit"].Journal))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(journal), "Open "+url+" and check it.") {
			t.Errorf("%s: the run's transcript does not have the input with %s:\n%s", what, url, journal)
		}
		return url
	}

	c.OK("apply", "-auto-approve", "urls.hcl")
	first := checkRun("first apply")
	if st := c.MustState(); st.Sandboxes["sandbox.web"].Status != "stopped" {
		t.Fatalf("sandbox status after apply: %q", st.Sandboxes["sandbox.web"].Status)
	}
	if out, code := c.Run("plan", "-detailed-exitcode", "urls.hcl"); code != 0 {
		t.Fatalf("plan after apply: exit %d\n%s", code, out)
	}

	// Running it again starts the stopped container, on new host ports:
	// the plan cannot know the URL, the run gets the new one, and the
	// plan still converges.
	out := c.OK("plan", "-replace=run.visit", "urls.hcl")
	mustContain(t, "plan -replace", out, "(known after sandbox.web is started)")
	c.OK("apply", "-auto-approve", "-replace=run.visit", "urls.hcl")
	t.Logf("URL of the first run %s, of the second %s", first, checkRun("second apply"))
	if out, code := c.Run("plan", "-detailed-exitcode", "urls.hcl"); code != 0 {
		t.Fatalf("plan after the second apply: exit %d\n%s", code, out)
	}
}
