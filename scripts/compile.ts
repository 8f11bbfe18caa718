// Typecheck and build in one compiler pass per snapshot: one program over a chapter's src/ and tests/ (its
// tsconfig.json) reports every type error, and with --emit the same program writes src/ to dist/ as the
// chapter's tsconfig.build.json says. The root tsconfig.json (scripts, configs) is checked too, never emitted.
// `npm run typecheck` checks; `npm run build` checks and emits (it is all `.ci/run` calls for both).
import { dirname, join, relative, sep } from "node:path";
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

/** Type errors of one project; with `build`, its build config's outputs for the files under the build's rootDir. */
function compile(checkConfig: string, buildConfig: string | undefined): readonly ts.Diagnostic[] {
  const check = parsedConfig(checkConfig);
  if (buildConfig === undefined) {
    const program = ts.createProgram({ rootNames: check.fileNames, options: check.options });
    return [...check.errors, ...ts.getPreEmitDiagnostics(program)];
  }
  // The build's options (rootDir src, outDir dist, emit on) over the check's files (src and tests): the tests
  // are checked but never emitted, so their "not under rootDir" notice is not an error of this pass.
  const build = parsedConfig(buildConfig);
  const program = ts.createProgram({ rootNames: check.fileNames, options: build.options });
  const rootDir = build.options.rootDir ?? dirname(buildConfig);
  const emitted = new Set(build.fileNames.map((name) => ts.sys.resolvePath(name)));
  const tests = `${dirname(checkConfig).split(sep).join("/")}/tests/`;
  const real = [...check.errors, ...build.errors, ...ts.getPreEmitDiagnostics(program)].filter(
    (diagnostic) =>
      diagnostic.code !== 6059 || !ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n").includes(tests),
  );
  if (real.length > 0) return real;
  for (const source of program.getSourceFiles()) {
    if (!emitted.has(ts.sys.resolvePath(source.fileName))) continue;
    if (!ts.sys.resolvePath(source.fileName).startsWith(ts.sys.resolvePath(rootDir) + sep)) continue;
    const result = program.emit(source);
    if (result.emitSkipped || result.diagnostics.length > 0) return result.diagnostics;
  }
  return [];
}

function main(argv: readonly string[]): number {
  const emit = argv.includes("--emit");
  const projects: { name: string; check: string; build?: string }[] = [
    { name: "scripts and configs", check: join(repository, "tsconfig.json") },
    ...chapterNames(join(repository, "code", "chapters")).map((chapter) => {
      const folder = join(repository, "code", "chapters", chapter);
      return {
        name: chapter,
        check: join(folder, "tsconfig.json"),
        ...(emit ? { build: join(folder, "tsconfig.build.json") } : {}),
      };
    }),
  ];
  let failed = false;
  for (const project of projects) {
    const started = Date.now();
    const diagnostics = compile(project.check, project.build);
    const what =
      project.build === undefined
        ? "checked"
        : `checked, src/ written to ${relative(repository, join(dirname(project.build), "dist"))}`;
    if (diagnostics.length > 0) {
      failed = true;
      console.error(ts.formatDiagnosticsWithColorAndContext(diagnostics, host));
      console.error(`${project.name}: ${diagnostics.length} error(s)`);
    } else console.log(`${project.name}: ${what} (${((Date.now() - started) / 1000).toFixed(1)} s)`);
  }
  return failed ? 1 : 0;
}

process.exitCode = main(process.argv.slice(2));
