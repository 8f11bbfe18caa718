import { processIO, runCli } from "../../src/cli.js";

// The CLI as a real program whose stdin counts as a terminal, so a test can answer the approval question
// on a pipe and then send the process a signal, as Ctrl-C or a closed terminal would.
process.exitCode = await runCli(process.argv.slice(2), { ...processIO(), stdinIsTTY: true });
