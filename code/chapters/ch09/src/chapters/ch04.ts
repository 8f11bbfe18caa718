#!/usr/bin/env node
import { runCli } from "../cli.js";

// The fixed entry of chapter 4: the unified CLI with `run --chapter 4` put in front.
process.exitCode = await runCli(["run", "--chapter", "4", ...process.argv.slice(2)], undefined, "ch04");
