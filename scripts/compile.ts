// Typecheck and build in one compiler pass per snapshot: one program over a chapter's src/ and tests/ (its
// tsconfig.json) reports every type error, and with --emit the same program writes src/ to dist/ as the
// chapter's tsconfig.build.json says. The root tsconfig.json (scripts, configs) is checked too, never emitted.
// `npm run typecheck` checks; `npm run build` checks and emits (it is all `.ci/run` calls for both).
// `npm run typecheck -- ch05` (or `npm run typecheck ch05`, no `--` needed) checks that one snapshot only.
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { chapterNames } from "./test-plan/plan.js";

const repository = fileURLToPath(new URL("../", import.meta.url));

function parsedConfig(file: string): ts.ParsedCommandLine {
  const parsed = ts.getParsedCommandLineOfConfigFile(file, undefined, {
    ...ts.sys,
    onUnRecoverableConfigFileDiagnostic: (diagnostic) => {
      throw new Error(ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n"));
    },
  });
  if (parsed === undefined) throw new Error(`cannot read ${file}`);
  return parsed;
}

const host: ts.FormatDiagnosticsHost = {
  getCanonicalFileName: (name) => name,
  getCurrentDirectory: () => repository,
  getNewLine: () => "\n",
};

const slashes = (path: string): string => path.replace(/\\/g, "/");

/** A project checked in one pass, and the program that checked it (lint reads its types from the same). */
export interface Compiled {
  readonly name: string;
  readonly program: ts.Program;
  readonly diagnostics: readonly ts.Diagnostic[];
  /** What the pass did, for the log line. */
  readonly what: string;
}

/**
 * One program over `checkConfig`'s files (a chapter's src and tests). With `buildConfig` it takes the build's
 * options (rootDir src, outDir dist, emit on) and, when nothing is wrong, writes the files under that rootDir:
 * the tests are checked but never emitted, so their "not under rootDir" notice is no error of this pass.
 */
function compile(name: string, checkConfig: string, buildConfig: string | undefined): Compiled {
  const check = parsedConfig(checkConfig);
  const build = buildConfig === undefined ? undefined : parsedConfig(buildConfig);
  const program = ts.createProgram({ rootNames: check.fileNames, options: (build ?? check).options });
  const tests = `${slashes(dirname(checkConfig))}/tests/`;
  const diagnostics = [...check.errors, ...(build?.errors ?? []), ...ts.getPreEmitDiagnostics(program)].filter(
    (diagnostic) =>
      diagnostic.code !== 6059 || !ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n").includes(tests),
  );
  if (build === undefined || buildConfig === undefined) return { name, program, diagnostics, what: "checked" };
  const what = `checked, src/ written to ${slashes(relative(repository, join(dirname(buildConfig), "dist")))}`;
  if (diagnostics.length > 0) return { name, program, diagnostics, what };
  const rootDir = `${slashes(ts.sys.resolvePath(build.options.rootDir ?? dirname(buildConfig)))}/`;
  const emitted = new Set(build.fileNames.map((file) => slashes(ts.sys.resolvePath(file))));
  for (const source of program.getSourceFiles()) {
    const file = slashes(ts.sys.resolvePath(source.fileName));
    if (!emitted.has(file) || !file.startsWith(rootDir)) continue;
    const result = program.emit(source);
    if (result.emitSkipped || result.diagnostics.length > 0)
      return { name, program, diagnostics: result.diagnostics, what };
  }
  return { name, program, diagnostics, what };
}

/**
 * Checks the root project and every snapshot, each in one pass, printing a line per project (and every error);
 * with `emit`, each snapshot's src/ is written to its dist/ in the same pass. With `only` (chapter names), just
 * those snapshots.
 */
export function compileProjects(
  emit: boolean,
  only: readonly string[] = [],
): { programs: ts.Program[]; failed: boolean } {
  const chapters = chapterNames(join(repository, "code", "chapters"));
  const programs: ts.Program[] = [];
  let failed = false;
  const projects = only.length === 0 ? [undefined, ...chapters] : chapters.filter((name) => only.includes(name));
  for (const chapter of projects) {
    const started = Date.now();
    const folder = chapter === undefined ? repository : join(repository, "code", "chapters", chapter);
    const build = chapter !== undefined && emit ? join(folder, "tsconfig.build.json") : undefined;
    const compiled = compile(chapter ?? "scripts and configs", join(folder, "tsconfig.json"), build);
    programs.push(compiled.program);
    if (compiled.diagnostics.length > 0) {
      failed = true;
      console.error(ts.formatDiagnosticsWithColorAndContext(compiled.diagnostics, host));
      console.error(`${compiled.name}: ${compiled.diagnostics.length} error(s)`);
    } else console.log(`${compiled.name}: ${compiled.what} (${((Date.now() - started) / 1000).toFixed(1)} s)`);
  }
  return { programs, failed };
}

/** The chapters named on the command line (`ch05`, `5`), or the reason they cannot be checked. */
export function chosenChapters(argv: readonly string[], known: readonly string[]): string[] | string {
  const named = argv.filter((arg) => !arg.startsWith("-"));
  const chosen = named.map((arg) => (/^\d+$/.test(arg) ? `ch${arg.padStart(2, "0")}` : arg));
  const unknown = chosen.filter((name) => !known.includes(name));
  if (unknown.length > 0) return `no such chapter: ${unknown.join(", ")} (choose from ${known.join(", ")})`;
  return chosen;
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  const argv = process.argv.slice(2);
  const only = chosenChapters(argv, chapterNames(join(repository, "code", "chapters")));
  if (typeof only === "string") {
    console.error(`${only}\nUsage: npm run typecheck [-- chNN …]   (no chapter: the scripts and every snapshot)`);
    process.exitCode = 2;
  } else process.exitCode = compileProjects(argv.includes("--emit"), only).failed ? 1 : 0;
}
