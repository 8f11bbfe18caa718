#!/usr/bin/env node
import { runProfile } from "../cli.js";
import { P07 } from "../core/profiles.js";

process.exitCode = await runProfile(P07, process.argv.slice(2));
