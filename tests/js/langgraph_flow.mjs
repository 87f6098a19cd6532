// The JS SDK's side of tests/web/test_langgraph_js.py: @langchain/langgraph-sdk's Client,
// pointed at approvals serve's /langgraph face as its users point it, drives one approval.
// The starter creates a thread and runs the refund agent to its interrupt; the approver
// finds the thread with threads.search({status: "interrupted"}) and resumes it with HITL's
// command; an approver of another group finds nothing. Prints one JSON object of what each
// step answered (the test asserts on it) and exits 0, or prints {"error": ...} and exits 1.
//
// Environment: APPROVALS_JS_SDK, the directory `make js-sdk` installed the SDK into;
// LANGGRAPH_URL, the face's URL; STARTER_TOKEN, APPROVER_TOKEN and OUTSIDER_TOKEN, API tokens.

import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

/** The SDK's ESM entry point, found through its package's own exports map. */
async function loadSdk(dir) {
  const require = createRequire(join(dir, "package.json"));
  const manifest = require.resolve("@langchain/langgraph-sdk/package.json");
  const pkg = JSON.parse(await readFile(manifest, "utf8"));
  const entry = join(manifest, "..", pkg.exports["."].import.default);
  return { version: pkg.version, sdk: await import(pathToFileURL(entry).href) };
}

function need(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
}

async function flow() {
  const major = Number(process.versions.node.split(".")[0]);
  if (major < 20) throw new Error(`node ${process.version} is older than the SDK needs (20)`);
  const { version, sdk } = await loadSdk(need("APPROVALS_JS_SDK"));
  const apiUrl = need("LANGGRAPH_URL");
  // No retries: a refused request must reach the test as it was answered.
  const client = (token) =>
    new sdk.Client({ apiUrl, apiKey: token, callerOptions: { maxRetries: 0 } });
  const starter = client(need("STARTER_TOKEN"));
  const approver = client(need("APPROVER_TOKEN"));
  const outsider = client(need("OUTSIDER_TOKEN"));

  const thread = await starter.threads.create();
  const started = await starter.runs.wait(thread.thread_id, "refund", {
    input: { messages: [{ role: "user", content: "refund 1001" }] },
  });
  const found = await approver.threads.search({ status: "interrupted" });
  const outsiderFound = await outsider.threads.search({ status: "interrupted" });
  const resumed = await approver.runs.wait(thread.thread_id, "refund", {
    command: { resume: { decisions: [{ type: "approve" }] } },
  });
  const after = await starter.threads.get(thread.thread_id);
  const state = await starter.threads.getState(thread.thread_id);
  return {
    sdk_version: version,
    thread,
    started,
    found: found.map(({ thread_id, status, interrupts }) => ({ thread_id, status, interrupts })),
    outsider_found: outsiderFound.map((t) => t.thread_id),
    resumed,
    status_after: after.status,
    state_after: { interrupts: state.interrupts, values: state.values },
  };
}

try {
  console.log(JSON.stringify(await flow()));
} catch (error) {
  console.log(JSON.stringify({ error: String(error?.stack ?? error), status: error?.status }));
  process.exit(1);
}
