// A vitest setup file for every chapter project: it records which snapshot files the test file really loads
// (modules the worker evaluated, modules a started Node process loaded) and opens (fs calls, here and in those
// processes), and fails the test file when one of them is not among its declared inputs (plan.ts). So an input
// the plan forgot cannot go unnoticed: the gate names the file, in the chapter that ran the test.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative, sep } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, inject } from "vitest";
import { chaptersRoot, installFsRecorder, TRACE_DIR_VARIABLE } from "./fs-recorder.mjs";
import type { TestInputs } from "./plan.js";
import { undeclaredTouches } from "./undeclared.js";

declare module "vitest" {
  export interface ProvidedContext {
    /** This project's chapter, and each of its test files' declared inputs (snapshot-relative, by test file). */
    testInputs: { chapter: string; tests: Record<string, TestInputs> };
  }
}

interface WorkerState {
  evaluatedModules?: { fileToModulesMap?: Map<string, unknown> };
}

const touched = new Set<string>();
installFsRecorder((path: string) => touched.add(path));

// Every temporary folder the test file makes, a demo's agent-tutorial-demo-* included (in this process or in one it
// starts, which inherits these variables), lies in one folder of the file's own, removed when the file ends, passed
// or failed: a failing test leaves nothing behind in the machine's temporary folder.
// A worker may run several files: each one's folder is made in the machine's, not in the last file's (gone by now).
process.env.AGENT_TEST_MACHINE_TMP ??= tmpdir();
const ownTmp = mkdtempSync(join(process.env.AGENT_TEST_MACHINE_TMP, "agent-test-tmp-"));
for (const name of ["TMPDIR", "TMP", "TEMP"]) process.env[name] = ownTmp;

// Node processes the test starts record what they load and open into this folder (child-trace.mjs).
const traceDir = mkdtempSync(join(tmpdir(), "agent-test-trace-"));
process.env[TRACE_DIR_VARIABLE] = traceDir;
const childTracer = pathToFileURL(join(import.meta.dirname, "child-trace.mjs")).href;
if (!(process.env.NODE_OPTIONS ?? "").includes(childTracer)) {
  process.env.NODE_OPTIONS = `${process.env.NODE_OPTIONS ?? ""} --import=${childTracer}`.trim();
}

function evaluatedFiles(): string[] {
  const state = (globalThis as { __vitest_worker__?: WorkerState }).__vitest_worker__;
  return [...(state?.evaluatedModules?.fileToModulesMap?.keys() ?? [])];
}

function childTouches(): string[] {
  const paths: string[] = [];
  for (const name of readdirSync(traceDir)) {
    for (const line of readFileSync(join(traceDir, name), "utf8").split("\n")) if (line !== "") paths.push(line);
  }
  return paths;
}

// vitest hands the file's suite as the second argument, and insists the first be a destructuring pattern.
// eslint-disable-next-line no-empty-pattern
afterAll(({}, suite) => {
  const { chapter, tests } = inject("testInputs");
  const testFile = relative(join(chaptersRoot, chapter), suite.file.filepath).split(sep).join("/");
  const paths = [...touched, ...evaluatedFiles(), ...childTouches()];
  rmSync(ownTmp, { recursive: true, force: true });
  const problems = undeclaredTouches(paths, chapter, testFile, tests[testFile]);
  if (problems.length > 0) {
    throw new Error(
      `${chapter}/${testFile} loaded or opened snapshot files that are not among its inputs; declare them in ` +
        `scripts/test-plan/declarations.ts:\n- ${problems.join("\n- ")}`,
    );
  }
});
