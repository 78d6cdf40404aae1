"""Building the python-telegram-bot Application around a consultation engine.

Why the builder settings: updates of one chat run in order but chats run in
parallel (`PerChatUpdateProcessor`, thousands of slots, so a slow model in one chat
never holds up another), except /reset and /status, which answer at once; flood
control pauses only the chat Telegram limited (`ChatFloodControl`); the HTTP pool
is large enough for hundreds of replies at once.
"""

from __future__ import annotations

from collections.abc import Callable

from telegram import Update
from telegram.ext import (
    Application,
    ApplicationBuilder,
    CallbackQueryHandler,
    CommandHandler,
    MessageHandler,
    PreCheckoutQueryHandler,
    filters,
)

from bot.commands.consultation import Commands
from bot.commands.exports import Exports
from bot.commands.forget import FORGET, Forgetting
from bot.commands.given_up import give_up
from bot.commands.history import SHOW, HistoryView
from bot.commands.knowledge import (
    KNOWLEDGE_COMMAND,
    KnowledgeCaption,
    KnowledgeCommand,
    OperatorKnowledge,
)
from bot.commands.language_choice import CHOOSE_LANGUAGE, LanguageChoice
from bot.commands.memory import DELETE_FACT, MemoryCommands
from bot.commands.model_choice import CHOOSE_MODEL, ModelChoice
from bot.commands.plans import BUY, PlanCommands, sells_plans
from bot.commands.quota import QuotaCommand
from bot.commands.round_presses import RoundPresses
from bot.commands.stats import StatsCommand, StoredBots
from bot.commands.turns import TurnRunner
from bot.commands.usage import UsageCommand
from bot.handlers import Handlers
from bot.transport.config import BotConfig
from bot.transport.flood import ChatFloodControl
from bot.transport.keyboards import ANSWER, ANSWER_NOW, EXPORT, FINAL_NOW, FOLLOW_UP, PICK, SEND
from bot.transport.menus import PersonalMenus
from bot.transport.outage import OutageNotices
from bot.transport.say import Say
from bot.transport.telegram_http import AiohttpRequest
from bot.updates.access import RateLimiter
from bot.updates.buttons import Buttons
from bot.updates.cluster_state import IN_MEMORY, SharedState
from bot.updates.ordering import PerChatUpdateProcessor
from core.domain.outcomes import Reply
from core.primitives.intake_gate import IntakeGate
from core.turns.engine import Engine
from core.turns.plan_sales import PlanSales
from core.turns.sales_figures import StarsFigures
from media.intake import Intake

POOL_SIZE = 1024
FILES = filters.VOICE | filters.AUDIO | filters.VIDEO_NOTE | filters.Document.ALL | filters.PHOTO
"""Messages whose file can be a turn (read by `media.intake`)."""
UNORDERED_COMMANDS = ("reset", "status")
"""Answered at once even while the chat's reply is being written (/reset stops it)."""
INTERRUPTING_COMMANDS = ("reset",)
"""Stop the chat's update being handled, on whichever worker handles it (the shared inbox)."""


def build_application(
    config: BotConfig,
    engine: Engine,
    *,
    on_reply: Callable[[Reply], None] | None = None,
    shared: SharedState = IN_MEMORY,
    intake: Intake | None = None,
    on_given_up: Callable[[str], object] | None = None,
    knowledge: OperatorKnowledge | None = None,
    sales: PlanSales | None = None,
    turn_intake: IntakeGate | None = None,
    stars: StarsFigures | None = None,
    bots: StoredBots | None = None,
) -> Application:
    """The Application; `on_reply` sees every reply produced (metrics); `shared` is the
    state kept between updates (this process's memory unless given); `intake` reads the
    files users send (without it they get the "text only" answer); `on_given_up` hears the
    reason of each update stopped past `config.handling_deadline` (metrics); `knowledge` is
    what the operators' /knowledge manages (without it the bot has no such command);
    `sales` the plans sold in Stars (without it: /plans, /refund, /cancelsub, /resumesub,
    /paysupport, /terms and payments are not handled); `stars` the figures of plans sold
    in Stars, which an operator's /stats ends with; `bots` the bots stored besides the
    deployment's own (the deployment's bot's /stats lists each; None: none); `turn_intake`
    lets a few updates at a time from arrival to their model call (the process's gate, one
    for all its bots; None: no gate)."""

    async def past_deadline(update: Update) -> None:
        if on_given_up is not None:
            on_given_up("deadline")
        await give_up(application.bot, engine, update, config.scope)

    processor = PerChatUpdateProcessor(
        unordered_commands=UNORDERED_COMMANDS,
        deadline=config.handling_deadline,
        on_deadline=past_deadline,
        intake=turn_intake,
    )
    builder = (
        ApplicationBuilder()
        .token(config.token)
        .base_url(config.api_base_url)
        .base_file_url(config.file_base_url)
        .concurrent_updates(processor)
        .rate_limiter(
            ChatFloodControl(overall_per_second=config.max_rate, waits=shared.flood_waits)
        )
        .request(
            AiohttpRequest(
                pool_size=POOL_SIZE,
                pool_timeout=30.0,
                connect_timeout=10.0,
                read_timeout=30.0,
                write_timeout=30.0,
            )
        )
    )
    # Webhook mode feeds updates from the aiohttp server instead of an Updater, and the
    # shared inbox feeds them when several workers run; its polling leader then calls
    # getUpdates with the bot's own long-poll request.
    if config.webhook or config.external_updates:
        builder = builder.updater(None)
    if not config.webhook:
        builder = builder.get_updates_request(AiohttpRequest(pool_size=1, read_timeout=40.0))
    application = builder.build()
    register(
        application,
        config,
        engine,
        on_reply=on_reply,
        shared=shared,
        intake=intake,
        knowledge=knowledge,
        sales=sales,
        stars=stars,
        bots=bots,
    )
    return application


def register(
    application: Application,
    config: BotConfig,
    engine: Engine,
    *,
    on_reply: Callable[[Reply], None] | None = None,
    shared: SharedState = IN_MEMORY,
    intake: Intake | None = None,
    knowledge: OperatorKnowledge | None = None,
    sales: PlanSales | None = None,
    stars: StarsFigures | None = None,
    bots: StoredBots | None = None,
) -> None:
    """Wire the handlers: one turn runner and one `say` shared by all."""
    bot = application.bot
    sells = sells_plans(sales)
    outage = OutageNotices()  # one notice a minute per chat, whichever part failed
    turns = TurnRunner(
        ttl_minutes=config.ttl_minutes,
        private_interval=config.private_progress_interval,
        group_interval=config.group_progress_interval,
        on_reply=on_reply,
        undelivered=shared.undelivered,
        outage=outage,
        remember=lambda consultation_id: engine.memories.remember(consultation_id),
        spawn=application.create_task,
        keyboards=shared.round_keyboards,
        scope=config.scope,
        offer_plans=sells,
    )
    say = Say(bot)
    menus = PersonalMenus(bot, payments=sells)
    languages = LanguageChoice(engine.languages, say=say, menus=menus, language=config.language)
    handlers = Handlers(
        engine,
        config,
        turns=turns,
        say=say,
        rate_limits=shared.rate_limits,
        intake=intake,
        outage=outage,
        localize=languages.apply,
        blocked=engine.blocks.blocked,
    )
    commands = Commands(
        engine, config, turns=turns, say=say, refuse=handlers.refuse, payments=sells
    )
    rounds = RoundPresses(engine.turns, turns=turns)
    forgetting = Forgetting(engine, turns=turns, say=say, menus=menus)
    history = HistoryView(engine.history, say=say)
    exports = Exports(engine.history, say=say)
    memory = MemoryCommands(engine.memories, say=say)
    models = ModelChoice(
        engine.settings,
        say=say,
        refuse=handlers.refuse,
        may_configure=commands.may_configure,
        plan_models=engine.quotas.plan_models if sells else None,
    )
    usage = UsageCommand(engine, say=say)
    quota = QuotaCommand(
        engine.quotas, say=say, refuse=handlers.refuse, admin_user_ids=config.admin_user_ids
    )
    stats = StatsCommand(engine.figures, config, say=say, stars=stars, bots=bots)
    plans = (
        None
        if sales is None
        else PlanCommands(
            sales,
            say=say,
            refuse=handlers.refuse,
            admin_user_ids=config.admin_user_ids,
            allowed_user_ids=config.allowed_user_ids,
            support_text=config.payment_support_text,
            terms_text=config.payment_terms_text,
            scope=config.scope,
        )
    )
    buy = {} if plans is None else {BUY: plans.buy}
    buttons = Buttons(
        {
            **buy,
            ANSWER_NOW: commands.answer_button,
            DELETE_FACT: memory.delete_button,
            ANSWER: rounds.answer,
            PICK: rounds.pick,
            SEND: rounds.send,
            FINAL_NOW: rounds.final_now,
            FOLLOW_UP: handlers.follow_ups.press,
            "rounds": commands.rounds_button,
            "role": commands.role_button,
            CHOOSE_MODEL: models.press,
            FORGET: forgetting.press,
            EXPORT: exports.export_button,
            SHOW: history.show_button,
            CHOOSE_LANGUAGE: languages.press,
        },
        allowed=handlers.allowed,
        press_limits=(
            RateLimiter(config.button_presses_per_minute)
            if shared.press_limits is None
            else shared.press_limits
        ),
        localize=languages.apply,
        scope=config.scope,
        language=config.language,
    )
    only_new = filters.UpdateType.MESSAGE  # edited messages are ignored (see bot.handlers)
    for name, callback in (
        ("start", commands.start),
        ("help", commands.help),
        ("rounds", commands.rounds),
        ("reset", commands.reset),
        ("status", commands.status),
        ("answer", commands.answer),
        ("retry", commands.retry),
        ("history", history.history),
        ("export", exports.export),
        ("role", commands.role),
        ("model", models.command),
        ("memory", memory.memory),
        ("usage", usage.usage),
        ("stats", stats.stats),
        ("forget", forgetting.command),
        ("language", languages.command),
        ("quota", quota.command),
    ):
        application.add_handler(CommandHandler(name, handlers.command(callback), filters=only_new))
    if plans is not None:
        for name, callback in (
            ("plans", plans.plans),
            ("refund", plans.refund),
            ("cancelsub", plans.cancel_subscription),
            ("resumesub", plans.resume_subscription),
            ("paysupport", plans.paysupport),
            ("terms", plans.terms),
        ):
            command = handlers.command(callback)
            application.add_handler(CommandHandler(name, command, filters=only_new))
        application.add_handler(PreCheckoutQueryHandler(plans.on_checkout))
        application.add_handler(MessageHandler(filters.SUCCESSFUL_PAYMENT, plans.on_paid))
    if knowledge is not None:  # before the unknown commands and the files it takes from them
        operators = KnowledgeCommand(
            knowledge,
            config,
            engine.config,
            roles=engine.settings.roles,
            say=say,
            unknown=commands.unknown,
        )
        # As an unknown command is: in a group only when it names this bot.
        application.add_handler(
            CommandHandler(
                KNOWLEDGE_COMMAND,
                handlers.command(operators.command, addressed_only=True),
                filters=only_new,
            )
        )
        application.add_handler(
            MessageHandler(only_new & KnowledgeCaption(), handlers.command(operators.caption))
        )
    application.add_handler(MessageHandler(filters.StatusUpdate.MIGRATE, handlers.on_migrate))
    application.add_handler(
        MessageHandler(
            only_new & filters.COMMAND, handlers.command(commands.unknown, addressed_only=True)
        )
    )
    application.add_handler(MessageHandler(only_new & FILES, handlers.on_file))
    text_like = filters.TEXT | filters.CAPTION
    application.add_handler(
        MessageHandler(only_new & text_like & ~filters.COMMAND, handlers.on_message)
    )
    application.add_handler(
        MessageHandler(only_new & ~text_like & ~filters.StatusUpdate.ALL, handlers.on_media)
    )
    application.add_handler(CallbackQueryHandler(buttons.on_press))
    application.add_error_handler(handlers.on_error)
