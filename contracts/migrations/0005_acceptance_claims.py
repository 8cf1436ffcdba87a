"""Acceptance runs record who submitted them and, for the lessor's claims, the lessee's answer
and an operator's decision (docs/security.md). Runs stored before are `recorded` by an
`unrecorded` submitter: nobody knows now which side posted them, and they have counted already.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0002_apikey_created_by_key'),
        ('contracts', '0004_event_status_constraints'),
    ]

    operations = [
        migrations.AddField(
            model_name='acceptancerun',
            name='claim_expires_at',
            field=models.DateTimeField(blank=True, help_text="A claim: when the lessee's window to answer closes.", null=True),
        ),
        migrations.AddField(
            model_name='acceptancerun',
            name='decided_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='acceptancerun',
            name='decided_by',
            field=models.CharField(blank=True, help_text='The operator.', max_length=200),
        ),
        migrations.AddField(
            model_name='acceptancerun',
            name='decision_reason',
            field=models.TextField(blank=True),
        ),
        migrations.AddField(
            model_name='acceptancerun',
            name='dispute_reason',
            field=models.TextField(blank=True),
        ),
        migrations.AddField(
            model_name='acceptancerun',
            name='responded_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='acceptancerun',
            name='responded_by',
            field=models.CharField(blank=True, help_text='Who confirmed or disputed the claim (or silence).', max_length=200),
        ),
        migrations.AddField(
            model_name='acceptancerun',
            name='status',
            field=models.CharField(choices=[('recorded', "Recorded (the lessee's or an operator's run)"), ('claimed', 'Claimed by the lessor, awaiting the lessee'), ('confirmed', 'Confirmed by the lessee'), ('deemed_accepted', "Accepted by the lessee's silence (per the clause)"), ('disputed', 'Disputed, awaiting an operator'), ('decided', 'Decided by an operator'), ('lapsed', 'Lapsed (acceptance was settled otherwise)')], default='recorded', max_length=16),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name='acceptancerun',
            name='submitted_by',
            field=models.CharField(blank=True, help_text='Who submitted it.', max_length=200),
        ),
        migrations.AddField(
            model_name='acceptancerun',
            name='submitted_by_organization',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='accounts.organization'),
        ),
        migrations.AddField(
            model_name='acceptancerun',
            name='submitted_by_party',
            field=models.CharField(choices=[('lessee', 'Lessee (customer, who pays)'), ('lessor', 'Lessor (provider, who is paid): a claim'), ('operator', 'Operator'), ('unrecorded', 'Not recorded (runs stored before submitters were)')], default='unrecorded', max_length=16),
            preserve_default=False,
        ),
        migrations.AlterField(
            model_name='acceptancerun',
            name='passed',
            field=models.BooleanField(help_text='The verdict of a run that counts; empty while it decides nothing.', null=True),
        ),
        migrations.AlterField(
            model_name='acceptancerun',
            name='run_by',
            field=models.CharField(blank=True, help_text='Who ran the benchmark.', max_length=200),
        ),
        migrations.AlterField(
            model_name='contractevent',
            name='kind',
            field=models.CharField(choices=[('created', 'Created'), ('amended', 'Amended'), ('status_changed', 'Status changed'), ('acceptance_run', 'Acceptance run recorded'), ('acceptance_claimed', 'Acceptance claimed by the lessor'), ('acceptance_confirmed', 'Acceptance claim confirmed'), ('acceptance_deemed_accepted', 'Acceptance claim accepted by silence'), ('acceptance_disputed', 'Acceptance claim disputed'), ('acceptance_decided', 'Acceptance dispute decided'), ('acceptance_claim_lapsed', 'Acceptance claim lapsed'), ('acceptance_passed', 'Acceptance passed'), ('acceptance_failed', 'Acceptance failed'), ('acceptance_rejection_right', 'Right to reject without fee'), ('price_step', 'Price step'), ('sla_credit', 'SLA credit'), ('exit_requested', 'Exit requested'), ('exit_fee', 'Early-termination fee'), ('exit_fee_waived', 'Early-termination fee waived'), ('data_migration', 'Data-migration window'), ('true_up', 'Minimum-commitment true-up'), ('prepayment_draw', 'Prepayment drawn'), ('deposit_return', 'Deposit returned'), ('hardware_replacement_rate', 'Hardware replaced'), ('insolvency_flagged', 'Provider insolvency flagged'), ('preempted', 'Interruptible capacity preempted')], max_length=32),
        ),
        migrations.AddIndex(
            model_name='acceptancerun',
            index=models.Index(condition=models.Q(('status', 'claimed')), fields=['claim_expires_at'], name='acceptance_open_claim_idx'),
        ),
        migrations.AddConstraint(
            model_name='acceptancerun',
            constraint=models.CheckConstraint(condition=models.Q(('status__in', ['recorded', 'claimed', 'confirmed', 'deemed_accepted', 'disputed', 'decided', 'lapsed']), ('submitted_by_party__in', ['lessee', 'lessor', 'operator', 'unrecorded'])), name='acceptance_status_and_party_known'),
        ),
        migrations.AddConstraint(
            model_name='acceptancerun',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('submitted_by_party', 'lessor'), ('claim_expires_at__isnull', False), models.Q(('status', 'recorded'), _negated=True)), models.Q(models.Q(('submitted_by_party', 'lessor'), _negated=True), ('claim_expires_at__isnull', True), ('status', 'recorded')), _connector='OR'), name='acceptance_claim_iff_lessor'),
        ),
        migrations.AddConstraint(
            model_name='acceptancerun',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('submitted_by_party__in', ['lessee', 'lessor']), _negated=True), ('submitted_by_organization__isnull', False), _connector='OR'), name='acceptance_party_has_organization'),
        ),
        migrations.AddConstraint(
            model_name='acceptancerun',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('status__in', ['confirmed', 'decided', 'deemed_accepted', 'recorded']), ('passed__isnull', False)), models.Q(models.Q(('status__in', ['confirmed', 'decided', 'deemed_accepted', 'recorded']), _negated=True), ('passed__isnull', True)), _connector='OR'), name='acceptance_verdict_iff_counts'),
        ),
        migrations.AddConstraint(
            model_name='acceptancerun',
            constraint=models.CheckConstraint(condition=models.Q(('status', 'lapsed'), models.Q(('status__in', ['recorded', 'claimed']), ('responded_at__isnull', True)), models.Q(('status__in', ['confirmed', 'deemed_accepted', 'disputed', 'decided']), ('responded_at__isnull', False), models.Q(('responded_by', ''), _negated=True)), _connector='OR'), name='acceptance_answer_recorded'),
        ),
        migrations.AddConstraint(
            model_name='acceptancerun',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('status__in', ['disputed', 'decided']), _negated=True), models.Q(('dispute_reason', ''), _negated=True), _connector='OR'), name='acceptance_dispute_has_reason'),
        ),
        migrations.AddConstraint(
            model_name='acceptancerun',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('status', 'decided'), ('decided_at__isnull', False), models.Q(('decided_by', ''), _negated=True), models.Q(('decision_reason', ''), _negated=True)), models.Q(models.Q(('status', 'decided'), _negated=True), ('decided_at__isnull', True)), _connector='OR'), name='acceptance_decided_has_decider'),
        ),
    ]
