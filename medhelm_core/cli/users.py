"""``medhelm users``: add, list, disable accounts and set passwords."""

from __future__ import annotations

import sys

import typer

from medhelm_core.accounts.users import add_user, disable_user, list_users, set_password
from medhelm_core.cli.common import JsonOption, app, emit, engine_for
from medhelm_core.db.engine import transaction
from medhelm_core.errors import ValidationError

users_app = typer.Typer(help="Manage accounts (admins, researchers, clinicians, adjudicators).", no_args_is_help=True)
app.add_typer(users_app, name="users")


def _read_password(from_stdin: bool) -> str | None:
    if not from_stdin:
        return None
    line = sys.stdin.readline().rstrip("\r\n")
    if not line:
        raise ValidationError("no password on standard input")
    return line


@users_app.command("add")
def add_cmd(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="Username (letters, digits, _ . @ -)."),
    role: str = typer.Option(..., "--role", "-r", help="admin, researcher, clinician or adjudicator."),
    password_stdin: bool = typer.Option(False, "--password-stdin", help="Read the password from stdin."),
    display_name: str = typer.Option("", "--display-name", help="Name shown in the app."),
    as_json: bool = JsonOption,
) -> None:
    """Create an account. Without --password-stdin it cannot sign in until a password is set."""
    password = _read_password(password_stdin)
    with transaction(engine_for(ctx)) as session:
        user = add_user(session, name, role, password, display_name=display_name)
        result = {"username": user.username, "role": user.role, "can_sign_in": user.password_hash is not None}
    emit(result, as_json, f"created {result['role']} {result['username']}")


@users_app.command("list")
def list_cmd(ctx: typer.Context, as_json: bool = JsonOption) -> None:
    """List accounts with their role and state (never their password hashes)."""
    with transaction(engine_for(ctx)) as session:
        rows = [
            {
                "username": u.username,
                "display_name": u.display_name,
                "role": u.role,
                "active": u.is_active,
                "has_password": u.password_hash is not None,
            }
            for u in list_users(session)
        ]
    text = "\n".join(
        f"{r['username']:<24} {r['role']:<12} {'active' if r['active'] else 'disabled'}"
        f"{'' if r['has_password'] else ' (no password)'}"
        for r in rows
    ) or "no accounts yet"
    emit(rows, as_json, text)


@users_app.command("disable")
def disable_cmd(ctx: typer.Context, name: str = typer.Argument(...), as_json: bool = JsonOption) -> None:
    """Disable an account; its ratings are kept."""
    with transaction(engine_for(ctx)) as session:
        disable_user(session, name)
    emit({"username": name, "active": False}, as_json, f"disabled {name}")


@users_app.command("set-password")
def set_password_cmd(
    ctx: typer.Context,
    name: str = typer.Argument(...),
    password_stdin: bool = typer.Option(True, "--password-stdin", help="Read the password from stdin."),
) -> None:
    """Set or replace an account's password (read from stdin)."""
    password = _read_password(True)
    with transaction(engine_for(ctx)) as session:
        set_password(session, name, password or "")
    typer.echo(f"password set for {name}")
